"""Tiered-storage naming: offload uuids, object keys, the index header, filesystem paths.

Formats reference, section 7. The uuid is Java's `new UUID(uidMsb, uidLsb).toString()`:
lowercase hex with dashes, built from two *signed* 64-bit halves.
"""

from __future__ import annotations

import re
import struct
import uuid as _uuid
from collections.abc import Mapping
from dataclasses import dataclass

from services.core.errors import InvalidArgument
from services.metadata.ledger_metadata import KEY_MANAGED_LEDGER, decode_raw_ledger_metadata
from services.metadata.paths import check_ledger_id
from services.metadata.pulsar_names import check_managed_ledger_name
from tombstone.formats import managed_ledger_pb2 as _ml

INDEX_SUFFIX = "-index"
LEDGER_INFIX = "-ledger-"
INDEX_MAGIC = 0xDE47DE47
DATA_BLOCK_MAGIC = 0xFBDBABCB
_INDEX_HEADER = struct.Struct(">iiqqii")
INDEX_HEADER_SIZE = _INDEX_HEADER.size
"""Bytes before an index object's segment metadata (magic, lengths, counts)."""
_INDEX_ENTRY = struct.Struct(">qiq")
_INT64 = 2**64
_UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# driverMetadata property names (2.7+ and the pre-2.7 `endpoint`).
PROP_DRIVER = "managedLedgerOffloadDriver"
PROP_BUCKET = "bucket"
PROP_REGION = "region"
PROP_SERVICE_ENDPOINT = "serviceEndpoint"
PROP_LEGACY_ENDPOINT = "endpoint"
PROP_STORAGE_BASE_PATH = "storageBasePath"


def _signed64(value: int) -> int:
    return value - _INT64 if value >= 2**63 else value


def uuid_from_bits(msb: int, lsb: int) -> str:
    """`new UUID(msb, lsb).toString()` for signed (or unsigned) 64-bit halves."""
    for name, half in (("uid_msb", msb), ("uid_lsb", lsb)):
        if not -(2**63) <= half < _INT64:
            raise InvalidArgument(name, f"{half} is not a 64-bit value")
    return str(_uuid.UUID(int=((msb % _INT64) << 64) | (lsb % _INT64)))


def uuid_to_bits(text: str) -> tuple[int, int]:
    """The signed (msb, lsb) pair of a canonical lowercase uuid string."""
    value = check_uuid(text).int
    return _signed64(value >> 64), _signed64(value & (_INT64 - 1))


def check_uuid(text: str, field: str = "uuid") -> _uuid.UUID:
    """Accept only the canonical form Java writes (lowercase, dashed)."""
    if not isinstance(text, str) or not _UUID_TEXT.fullmatch(text):
        raise InvalidArgument(field, f"{text!r} is not a lowercase dashed uuid")
    return _uuid.UUID(text)


def offload_uuid(context: _ml.OffloadContext) -> str | None:
    """The offload uuid of a ledger's offload context, or None when no offload was prepared."""
    if not context.HasField("uidMsb"):
        return None
    return uuid_from_bits(context.uidMsb, context.uidLsb)


def data_object_key(offload_id: str, ledger_id: int) -> str:
    """`<uuid>-ledger-<ledgerId>`."""
    check_uuid(offload_id)
    return f"{offload_id}{LEDGER_INFIX}{check_ledger_id(ledger_id)}"


def index_object_key(offload_id: str, ledger_id: int) -> str:
    """`<uuid>-ledger-<ledgerId>-index`."""
    return data_object_key(offload_id, ledger_id) + INDEX_SUFFIX


@dataclass(frozen=True)
class OffloadObjectKey:
    """What an offload object key says: uuid, ledger id, and data or index."""

    uuid: str
    ledger_id: int
    is_index: bool

    @property
    def key(self) -> str:
        make = index_object_key if self.is_index else data_object_key
        return make(self.uuid, self.ledger_id)


def parse_object_key(key: str) -> OffloadObjectKey:
    """Parse `<uuid>-ledger-<id>[-index]`; other keys raise `InvalidArgument("key")`."""
    is_index = key.endswith(INDEX_SUFFIX)
    stem = key[: -len(INDEX_SUFFIX)] if is_index else key
    head, infix, tail = stem.rpartition(LEDGER_INFIX)
    if not infix or not tail.isascii() or not tail.isdigit():
        raise InvalidArgument("key", f"{key!r} is not <uuid>-ledger-<id>[-index]")
    if not _UUID_TEXT.fullmatch(head):
        raise InvalidArgument("key", f"{key!r} does not start with an offload uuid")
    ledger_id = int(tail)
    if ledger_id >= 2**63:
        raise InvalidArgument("key", f"{key!r} has a ledger id beyond 64 bits")
    return OffloadObjectKey(uuid=head, ledger_id=ledger_id, is_index=is_index)


def filesystem_offload_path(
    storage_base_path: str | None, ml_name: str, ledger_id: int, offload_id: str
) -> str:
    """`<storageBasePath>/<mlName>/<ledgerId>-<uuid>` (no base when it is None).

    Built from checked parts only: a canonical ML name (no empty, `.` or `..` segment, no
    escaped separator), a canonical uuid and a ledger id, under a base without dot segments.
    So the path names exactly the directory of the owner `ml_name` names, whatever the
    filesystem resolves.
    """
    check_uuid(offload_id)
    check_managed_ledger_name(ml_name)
    leaf = f"{ml_name}/{check_ledger_id(ledger_id)}-{offload_id}"
    if storage_base_path is None:
        return leaf
    return f"{check_storage_base_path(storage_base_path).rstrip('/')}/{leaf}"


def check_storage_base_path(base: str, field: str = "storageBasePath") -> str:
    """A filesystem offloader base (`file:///data`, `hdfs://nn:8020/offload`, `/data`): no `.`
    or `..` segment and no control character, so that it cannot resolve elsewhere."""
    _, sep, rest = base.partition("://")
    path = rest.partition("/")[2] if sep else base
    if not base or any(part in (".", "..") for part in path.split("/")):
        raise InvalidArgument(field, f"{base!r} is empty or has a dot segment")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in base):
        raise InvalidArgument(field, f"{base!r} contains a control character")
    return base


def driver_properties(context: _ml.OffloadContext) -> dict[str, str]:
    """The offload context's driverMetadata properties as a dict (empty when absent)."""
    return {kv.key: kv.value for kv in context.driverMetadata.properties}


@dataclass(frozen=True)
class OffloadLocation:
    """Where an offloaded ledger lives, per its driverMetadata."""

    driver: str | None
    bucket: str | None
    region: str | None
    endpoint: str | None


def offload_location(
    driver_metadata: Mapping[str, str], *, default_bucket: str | None = None
) -> OffloadLocation:
    """Resolve the bucket as `deleteOffloaded` does: from the properties, else the config.

    An empty property map (ledgers offloaded by 2.1) means the currently configured bucket.
    A non-empty map without a `bucket` value gives `bucket=None`: the caller cannot know.
    """
    if not driver_metadata:
        return OffloadLocation(None, default_bucket, None, None)

    def prop(*names: str) -> str | None:
        for name in names:
            if driver_metadata.get(name):
                return driver_metadata[name]
        return None

    return OffloadLocation(
        driver=prop(PROP_DRIVER),
        bucket=prop(PROP_BUCKET),
        region=prop(PROP_REGION),
        endpoint=prop(PROP_SERVICE_ENDPOINT, PROP_LEGACY_ENDPOINT),
    )


@dataclass(frozen=True)
class OffloadIndexHeader:
    """The fixed header of an index object (`OffloadIndexBlockImpl.toStream`)."""

    index_block_length: int
    data_object_length: int
    data_header_length: int
    index_entry_count: int
    segment_metadata: bytes
    """Raw binary LedgerMetadataFormat (no BookieMetadataFormatVersion header)."""


def parse_index_header(data: bytes) -> OffloadIndexHeader:
    """Parse an index object's header; `InvalidArgument("index")` if it is not one."""
    if len(data) < _INDEX_HEADER.size:
        raise InvalidArgument("index", "truncated header")
    magic, block_len, obj_len, hdr_len, count, meta_len = _INDEX_HEADER.unpack_from(data)
    if magic % 2**32 != INDEX_MAGIC:
        raise InvalidArgument("index", f"bad magic {magic % 2**32:#010x}")
    end = _INDEX_HEADER.size + meta_len
    if meta_len < 0 or end > len(data):
        raise InvalidArgument("index", "truncated segment metadata")
    return OffloadIndexHeader(block_len, obj_len, hdr_len, count, data[_INDEX_HEADER.size : end])


def build_index_block(
    *,
    segment_metadata: bytes,
    entries: list[tuple[int, int, int]],
    data_object_length: int,
    data_header_length: int = 128,
) -> bytes:
    """An index object as Pulsar writes it; `entries` are (entryId, partId, offset)."""
    body = b"".join(_INDEX_ENTRY.pack(*entry) for entry in entries)
    total = _INDEX_HEADER.size + len(segment_metadata) + len(body)
    header = _INDEX_HEADER.pack(
        INDEX_MAGIC - 2**32,
        total,
        data_object_length,
        data_header_length,
        len(entries),
        len(segment_metadata),
    )
    return header + segment_metadata + body


def is_legacy_context(driver_name: str, driver_metadata: Mapping[str, str]) -> bool:
    """An offload context written by Pulsar 2.1: no driver name and no driver properties."""
    return not driver_name and not driver_metadata


def legacy_location(default_driver: str, default_bucket: str) -> tuple[str, dict[str, str]]:
    """(driver name, driver properties) standing in for a 2.1 context's missing ones.

    One shape wherever the default is applied (marker, verifier, reconciler), so that a PDLI
    filled by the marker and one resolved later name the same copy the same way.
    """
    return default_driver, {PROP_BUCKET: default_bucket}


def index_segment_length(head: bytes) -> int:
    """The segment-metadata length an index object's first `INDEX_HEADER_SIZE` bytes announce.

    `InvalidArgument("index")` if they are not an index header (bad magic, negative length).
    """
    if len(head) < _INDEX_HEADER.size:
        raise InvalidArgument("index", "truncated header")
    magic, _block, _obj, _hdr, _count, meta_len = _INDEX_HEADER.unpack_from(head)
    if magic % 2**32 != INDEX_MAGIC:
        raise InvalidArgument("index", f"bad magic {magic % 2**32:#010x}")
    if meta_len < 0:
        raise InvalidArgument("index", f"negative segment metadata length {meta_len}")
    return int(meta_len)


def index_managed_ledger(data: bytes, *, ledger_id: int, key: str) -> str | None:
    """The ML an index object's own segment metadata names (`pulsar/managed-ledger`).

    `data` holds at least the header and the segment metadata. None when the ledger's
    metadata carries no ML name (a ledger created before Pulsar 2.2). `InvalidArgument` or
    `CorruptMetadata` naming `key` when the bytes are not an index object.
    """
    header = parse_index_header(data)
    metadata = decode_raw_ledger_metadata(header.segment_metadata, ledger_id=ledger_id, path=key)
    return metadata.custom_text(KEY_MANAGED_LEDGER)
