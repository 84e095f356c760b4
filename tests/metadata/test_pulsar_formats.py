"""Managed-ledger, cursor and schema znode codecs, including Pulsar's compressed form."""

from __future__ import annotations

import struct
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.core.errors import InvalidArgument
from services.metadata import (
    CompressionType,
    CorruptMetadata,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)
from tests.metadata.wire import lfield, vfield

ML_PATH = "/managed-ledgers/t/ns/persistent/x"
CURSOR_PATH = ML_PATH + "/sub"


def ml_info_bytes() -> bytes:
    """Two LedgerInfo entries by hand: a closed offloaded one and the open one."""
    props = lfield(2, lfield(1, "bucket") + lfield(2, "b1"))
    driver = lfield(1, "aws-s3") + props
    offload = vfield(1, 5) + vfield(2, -6) + vfield(3, 1) + vfield(5, 1700) + lfield(6, driver)
    closed = vfield(1, 10) + vfield(2, 100) + vfield(3, 4096) + vfield(4, 1600) + lfield(5, offload)
    open_ = vfield(1, 11) + vfield(4, 0)
    return lfield(1, closed) + lfield(1, open_) + lfield(3, lfield(1, "k") + lfield(2, "v"))


def compressed(payload: bytes, ctype: int, data: bytes, size: int | None = None) -> bytes:
    """The 0x4778 frame: magic, BE int metadata size, metadata, compressed payload."""
    meta = vfield(1, ctype) + vfield(2, len(payload) if size is None else size)
    return struct.pack(">HI", 0x4778, len(meta)) + meta + data


def test_decode_hand_built_ml_info() -> None:
    """A raw ManagedLedgerInfo decodes with ledgers, offload context and properties."""
    info = decode_managed_ledger_info(ml_info_bytes(), path=ML_PATH)
    assert [li.ledgerId for li in info.ledgerInfo] == [10, 11]
    ctx = info.ledgerInfo[0].offloadContext
    assert (ctx.uidMsb, ctx.uidLsb, ctx.complete, ctx.driverMetadata.properties[0].value) == (
        5,
        -6,
        True,
        "b1",
    )
    assert not info.ledgerInfo[1].HasField("entries")
    assert info.properties[0].value == "v"


def test_zero_bytes_are_an_empty_ml_info() -> None:
    """A freshly created ML znode (0 bytes) is an empty ManagedLedgerInfo."""
    assert ManagedLedgerInfo() == decode_managed_ledger_info(b"", path=ML_PATH)


@pytest.mark.parametrize(
    ("ctype", "codec"),
    [
        (0, lambda b: b),
        (1, lambda b: bytes(cramjam.lz4.compress_block(b, store_size=False))),
        (2, zlib.compress),
        (3, lambda b: bytes(cramjam.zstd.compress(b))),
        (4, lambda b: bytes(cramjam.snappy.compress_raw(b))),
    ],
    ids=["NONE", "LZ4-raw-block", "ZLIB-zlib-wrapper", "ZSTD-frame", "SNAPPY-raw"],
)
def test_decode_hand_built_compressed(ctype: int, codec) -> None:
    """Each codec's 0x4778 frame decodes to the same ManagedLedgerInfo as the raw bytes."""
    raw = ml_info_bytes()
    expected = decode_managed_ledger_info(raw, path=ML_PATH)
    assert expected == decode_managed_ledger_info(compressed(raw, ctype, codec(raw)), path=ML_PATH)


def test_compressed_bytes_start_with_magic() -> None:
    """Our encoder writes 0x47 0x78, then the big-endian metadata size."""
    data = encode_managed_ledger_info(
        decode_managed_ledger_info(ml_info_bytes(), path=ML_PATH), compression=CompressionType.ZLIB
    )
    assert data[:5] == b"\x47\x78\x00\x00\x00"
    assert data[6 + data[5] : 8 + data[5]] == b"\x78\x9c"  # Deflater's default zlib header


def test_decode_compressed_cursor() -> None:
    """Cursor znodes use the same frame (ManagedCursorInfoMetadata)."""
    raw = vfield(1, 42) + vfield(2, 10) + vfield(3, 5) + lfield(8, lfield(1, "b") + lfield(2, "7"))
    info = decode_cursor_info(compressed(raw, 1, lz4(raw)), path=CURSOR_PATH)
    assert (
        info.cursorsLedgerId,
        info.markDeleteLedgerId,
        info.markDeleteEntryId,
        info.cursorProperties[0].value,
    ) == (42, 10, 5, "7")


def test_threshold_keeps_small_infos_raw() -> None:
    """Compression applies only when the serialized size exceeds the threshold."""
    info = decode_managed_ledger_info(ml_info_bytes(), path=ML_PATH)
    raw = info.SerializeToString()
    small = encode_managed_ledger_info(
        info, compression=CompressionType.LZ4, threshold_bytes=len(raw)
    )
    big = encode_managed_ledger_info(
        info, compression=CompressionType.LZ4, threshold_bytes=len(raw) - 1
    )
    assert (raw, b"\x47\x78") == (small, big[:2])


infos = st.lists(
    st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 10**9), st.integers(0, 10**12)),
    max_size=40,
)


@settings(max_examples=30, deadline=None)
@given(infos, st.sampled_from(list(CompressionType)))
def test_ml_info_round_trip(ledgers, compression: CompressionType) -> None:
    """Every ML info survives encode (any compression) → decode."""
    info = ManagedLedgerInfo()
    for ledger_id, entries, size in ledgers:
        info.ledgerInfo.add(ledgerId=ledger_id, entries=entries, size=size, timestamp=1)
    data = encode_managed_ledger_info(info, compression=compression)
    assert info == decode_managed_ledger_info(data, path=ML_PATH)


@pytest.mark.parametrize("compression", list(CompressionType))
def test_cursor_round_trip(compression: CompressionType) -> None:
    """A cursor info survives encode → decode with every compression."""
    info = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=3, markDeleteEntryId=4)
    info.properties.add(name="CompactedTopicLedger", value=99)
    data = encode_cursor_info(info, compression=compression)
    assert info == decode_cursor_info(data, path=CURSOR_PATH)


def test_schema_locator_round_trip_and_hand_built() -> None:
    """SchemaLocator is raw binary; its index lists every schema ledger."""
    entry = lambda v, lid: vfield(1, v) + lfield(2, vfield(1, lid) + vfield(2, 0)) + lfield(3, b"h")  # noqa: E731
    data = lfield(1, entry(1, 21)) + lfield(2, entry(0, 20)) + lfield(2, entry(1, 21))
    locator = decode_schema_locator(data, path="/schemas/t/ns/x")
    assert [e.position.ledgerId for e in locator.index] == [20, 21]
    assert locator == decode_schema_locator(encode_schema_locator(locator), path="/schemas/t/ns/x")


def test_encode_refuses_incomplete_messages() -> None:
    """Encoding a message with unset required fields is an InvalidArgument, not bad bytes."""
    with pytest.raises(InvalidArgument):
        encode_cursor_info(ManagedCursorInfo())
    with pytest.raises(InvalidArgument):
        encode_schema_locator(SchemaLocator())


def lz4(raw: bytes) -> bytes:
    return bytes(cramjam.lz4.compress_block(raw, store_size=False))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x0a\x05\x08", "garbage protobuf"),
        (b"\xff\xff\xff", "garbage protobuf"),
        (b"\x47\x78", "decompression failed"),
        (b"\x47\x78\x00\x00\x00\x10\x08", "decompression failed"),
        (b"\x47\x78\x00\x00\x00\x04" + vfield(1, 9) + vfield(2, 3) + b"abc", "decompression"),
        (compressed(ml_info_bytes(), 2, b"not zlib at all"), "decompression failed"),
        (compressed(ml_info_bytes(), 3, b"not zstd"), "decompression failed"),
        (compressed(ml_info_bytes(), 4, b"\xff\xff\xff\xff"), "decompression failed"),
        (compressed(ml_info_bytes(), 1, lz4(ml_info_bytes())[:-4]), "decompression failed"),
        (compressed(ml_info_bytes(), 1, lz4(ml_info_bytes()), size=5), "decompression failed"),
        (compressed(b"\xff\xff", 0, b"\xff\xff"), "decompression failed"),
    ],
    ids=[
        "truncated",
        "garbage",
        "magic-only",
        "truncated-meta",
        "unknown-codec",
        "bad-zlib",
        "bad-zstd",
        "bad-snappy",
        "truncated-lz4",
        "wrong-size",
        "garbage-payload",
    ],
)
def test_bad_ml_data_is_corrupt(data: bytes, problem: str) -> None:
    """Bad bytes raise CorruptMetadata naming the znode path and the problem."""
    with pytest.raises(CorruptMetadata) as err:
        decode_managed_ledger_info(data, path=ML_PATH)
    assert err.value.path == ML_PATH
    assert problem in str(err.value)


def test_empty_cursor_is_corrupt() -> None:
    """A cursor znode must carry cursorsLedgerId; 0 bytes are corrupt, not 'no cursor ledger'."""
    with pytest.raises(CorruptMetadata) as err:
        decode_cursor_info(b"", path=CURSOR_PATH)
    assert err.value.path == CURSOR_PATH


def test_bad_schema_locator_is_corrupt() -> None:
    """An unparsable locator raises CorruptMetadata with the path."""
    with pytest.raises(CorruptMetadata) as err:
        decode_schema_locator(b"\x0a\xff", path="/schemas/t/ns/x")
    assert err.value.path == "/schemas/t/ns/x"
