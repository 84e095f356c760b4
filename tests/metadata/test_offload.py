"""Offload naming: uuids from signed halves, object keys, index headers, locations."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import InvalidArgument
from services.metadata import (
    OffloadLocation,
    OffloadObjectKey,
    build_index_block,
    data_object_key,
    filesystem_offload_path,
    index_object_key,
    offload_location,
    offload_uuid,
    parse_index_header,
    parse_object_key,
    uuid_from_bits,
    uuid_to_bits,
)
from tombstone.formats import managed_ledger_pb2

U = "9c4bd7a3-51e0-4d8c-a0c6-2f1e0b7c5d42"


def test_uuid_from_signed_halves() -> None:
    """Java's new UUID(msb, lsb) with negative halves gives the two's-complement hex."""
    assert uuid_from_bits(-2, -(2**63)) == "ffffffff-ffff-fffe-8000-000000000000"
    assert uuid_from_bits(1, 2) == "00000000-0000-0001-0000-000000000002"


@settings(deadline=None)  # a loaded CI machine must not turn slowness into failure
@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_uuid_bits_round_trip(msb: int, lsb: int) -> None:
    """(msb, lsb) → string → (msb, lsb) is the identity for signed 64-bit halves."""
    assert (msb, lsb) == uuid_to_bits(uuid_from_bits(msb, lsb))


def test_uuid_matches_python_uuid() -> None:
    """The string is the canonical lowercase dashed form."""
    msb, lsb = uuid_to_bits(U)
    assert uuid.UUID(U) == uuid.UUID(uuid_from_bits(msb, lsb))


@pytest.mark.parametrize("bad", ["9C4BD7A3-51E0-4D8C-A0C6-2F1E0B7C5D42", "not-a-uuid", ""])
def test_non_canonical_uuid_is_rejected(bad: str) -> None:
    """Uppercase or malformed uuids raise InvalidArgument naming uuid."""
    with pytest.raises(InvalidArgument) as err:
        uuid_to_bits(bad)
    assert err.value.field == "uuid"


def test_offload_uuid_of_context() -> None:
    """An offload context yields its uuid only once a uid was prepared."""
    msb, lsb = uuid_to_bits(U)
    assert offload_uuid(managed_ledger_pb2.OffloadContext(uidMsb=msb, uidLsb=lsb)) == U
    assert offload_uuid(managed_ledger_pb2.OffloadContext(complete=False)) is None


def test_object_keys() -> None:
    """Data and index keys are <uuid>-ledger-<id> and <uuid>-ledger-<id>-index."""
    assert f"{U}-ledger-4294967296" == data_object_key(U, 4294967296)
    assert f"{U}-ledger-7-index" == index_object_key(U, 7)


@pytest.mark.parametrize(
    ("key", "parsed"),
    [
        (f"{U}-ledger-7", OffloadObjectKey(U, 7, False)),
        (f"{U}-ledger-7-index", OffloadObjectKey(U, 7, True)),
    ],
)
def test_parse_object_key(key: str, parsed: OffloadObjectKey) -> None:
    """Keys parse to (uuid, ledger id, index?) and rebuild to themselves."""
    assert parsed == parse_object_key(key)
    assert key == parsed.key


@pytest.mark.parametrize(
    "key",
    [U, f"{U}-index", f"{U}-ledger-", f"{U}-ledger-x", "junk-ledger-7", f"{U}-ledger-{2**63}"],
)
def test_parse_rejects_foreign_keys(key: str) -> None:
    """Keys that are not offload objects raise InvalidArgument naming key."""
    with pytest.raises(InvalidArgument) as err:
        parse_object_key(key)
    assert err.value.field == "key"


def test_filesystem_path() -> None:
    """<storageBasePath>/<mlName>/<ledgerId>-<uuid>, or without the base when it is null."""
    assert f"hdfs://nn/base/t/ns/persistent/x/7-{U}" == filesystem_offload_path(
        "hdfs://nn/base/", "t/ns/persistent/x", 7, U
    )
    assert f"t/ns/persistent/x/7-{U}" == filesystem_offload_path(None, "t/ns/persistent/x", 7, U)


@pytest.mark.parametrize(
    ("base", "ml_name", "field"),
    [
        ("file:///data", "t/ns/./persistent/x", "ml_name"),
        ("file:///data", "t/ns/persistent/..", "ml_name"),
        ("file:///data", "t/ns/persistent/a%2Fb", "ml_name"),
        ("file:///data", "t//persistent/x", "ml_name"),
        ("file:///data/../other", "t/ns/persistent/x", "storageBasePath"),
        ("/data/./x", "t/ns/persistent/x", "storageBasePath"),
    ],
)
def test_filesystem_path_only_from_canonical_parts(base: str, ml_name: str, field: str) -> None:
    """A path is never built from a non-canonical ML name or a base with dot segments."""
    with pytest.raises(InvalidArgument) as err:
        filesystem_offload_path(base, ml_name, 7, U)
    assert err.value.field == field


def test_location_from_2_7_properties() -> None:
    """2.7+ driverMetadata names the driver, bucket, region and serviceEndpoint."""
    props = {
        "managedLedgerOffloadDriver": "S3",
        "bucket": "b",
        "region": "",
        "serviceEndpoint": "e",
    }
    assert OffloadLocation("S3", "b", None, "e") == offload_location(props, default_bucket="d")


def test_location_from_pre_2_7_properties() -> None:
    """Pre-2.7 driverMetadata has bucket, region and endpoint."""
    props = {"bucket": "b", "region": "r", "endpoint": "e"}
    assert OffloadLocation(None, "b", "r", "e") == offload_location(props)


def test_empty_driver_metadata_uses_configured_bucket() -> None:
    """Ledgers offloaded by 2.1 have no driverMetadata: the configured bucket applies."""
    assert offload_location({}, default_bucket="cfg").bucket == "cfg"


def test_properties_without_bucket_give_unknown_bucket() -> None:
    """A non-empty map without a bucket does not fall back to the configured one."""
    assert offload_location({"region": "r"}, default_bucket="cfg").bucket is None


def test_index_header_by_hand() -> None:
    """The index header is BE int magic, int length, long, long, int count, int meta length."""
    data = (
        struct.pack(">IiqqiI", 0xDE47DE47, 55, 1000, 128, 1, 3)
        + b"abc"
        + struct.pack(">qiq", 0, 1, 128)
    )
    header = parse_index_header(data)
    assert (
        header.index_block_length,
        header.data_object_length,
        header.data_header_length,
        header.index_entry_count,
        header.segment_metadata,
    ) == (55, 1000, 128, 1, b"abc")
    assert data == build_index_block(
        segment_metadata=b"abc", entries=[(0, 1, 128)], data_object_length=1000
    )


@pytest.mark.parametrize(
    "data", [b"", b"\x00" * 40, struct.pack(">IiqqiI", 0xDE47DE47, 0, 0, 0, 0, 99) + b"x"]
)
def test_bad_index_header(data: bytes) -> None:
    """Truncated data, a wrong magic or short segment metadata raise InvalidArgument."""
    with pytest.raises(InvalidArgument):
        parse_index_header(data)
