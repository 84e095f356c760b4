"""BookKeeper ledger metadata: the value type and the znode codec (formats reference, section 2).

A ledger znode holds `BookieMetadataFormatVersion\\t<N>\\n` followed by, for N=3, a varint32
length and a binary `LedgerMetadataFormat`; for N=2, its protobuf TextFormat; for N=1, a
line-based text (decoded only).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf import message as _message
from google.protobuf import text_format

from services.core.errors import InvalidArgument
from services.metadata.errors import CorruptMetadata, missing_required_fields
from services.metadata.paths import check_ledger_id
from tombstone.formats import bookkeeper_pb2 as _bk

HEADER_PREFIX = b"BookieMetadataFormatVersion\t"
CURRENT_FORMAT_VERSION = 3
_MAX_VERSION_DIGITS = 10
# v1 writes this as the "last entry id" of a ledger in recovery.
_V1_IN_RECOVERY = -102

# Custom metadata keys Pulsar writes (formats reference, section 4).
KEY_APPLICATION = "application"
KEY_COMPONENT = "component"
KEY_MANAGED_LEDGER = "pulsar/managed-ledger"
KEY_CURSOR = "pulsar/cursor"
KEY_SCHEMA_ID = "pulsar/schemaId"
KEY_COMPACTED_TOPIC = "pulsar/compactedTopic"
KEY_COMPACTED_TO = "pulsar/compactedTo"
APPLICATION_PULSAR = "pulsar"
COMPONENT_MANAGED_LEDGER = "managed-ledger"
COMPONENT_COMPACTED_LEDGER = "compacted-ledger"
COMPONENT_SCHEMA = "schema"
COMPONENT_DELAYED_INDEX_BUCKET = "delayed-index-bucket"


class LedgerState(enum.IntEnum):
    """`LedgerMetadataFormat.State` (numbers are the wire values)."""

    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


class DigestType(enum.IntEnum):
    """`LedgerMetadataFormat.DigestType` (HMAC is the API's `MAC`)."""

    CRC32 = 1
    HMAC = 2
    CRC32C = 3
    DUMMY = 4


@dataclass(frozen=True)
class Segment:
    """One ensemble of the ledger's history, in force from `first_entry_id` on."""

    first_entry_id: int
    ensemble: tuple[str, ...]


@dataclass(frozen=True)
class LedgerMetadata:
    """The decoded content of a ledger znode (the id comes from the path)."""

    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: LedgerState = LedgerState.OPEN
    length: int = 0
    """Bytes; meaningful when CLOSED (0 otherwise)."""
    last_entry_id: int = -1
    """Meaningful when CLOSED (-1 otherwise, and for an empty closed ledger)."""
    segments: tuple[Segment, ...] = ()
    digest_type: DigestType | None = DigestType.CRC32C
    password: bytes | None = b""
    ctime: int | None = None
    """Creation time in ms when the writer stored it; Pulsar's writers usually do not."""
    custom_metadata: Mapping[str, bytes] = field(default_factory=dict)
    ctoken: int = 0
    format_version: int = CURRENT_FORMAT_VERSION

    def custom_text(self, key: str) -> str | None:
        """A custom metadata value as text (invalid UTF-8 is replaced, so it never matches)."""
        value = self.custom_metadata.get(key)
        return None if value is None else value.decode("utf-8", errors="replace")

    @property
    def application(self) -> str | None:
        return self.custom_text(KEY_APPLICATION)

    @property
    def component(self) -> str | None:
        return self.custom_text(KEY_COMPONENT)

    @property
    def managed_ledger_name(self) -> str | None:
        return self.custom_text(KEY_MANAGED_LEDGER)

    @property
    def cursor_name(self) -> str | None:
        return self.custom_text(KEY_CURSOR)

    @property
    def schema_id(self) -> str | None:
        return self.custom_text(KEY_SCHEMA_ID)

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED


def decode_ledger_metadata(data: bytes, *, ledger_id: int, path: str) -> LedgerMetadata:
    """Decode a ledger znode's bytes; `CorruptMetadata` naming `path` if they are not valid."""
    version, body = _read_header(data, path)
    if version == 3:
        return _from_format(_parse_v3(body, path), ledger_id, version)
    if version == 2:
        return _from_format(_parse_v2(body, path), ledger_id, version)
    if version == 1:
        return _parse_v1(body, ledger_id, path)
    raise CorruptMetadata(path, f"unsupported metadata format version {version}")


@dataclass(frozen=True, slots=True)
class LedgerSummary:
    """The part of a ledger znode a delete decision reads: its state, length, creation time
    and custom metadata. Decoded from the same bytes, with the same checks, as
    `LedgerMetadata`; the ensembles, digest and password are parsed (and checked) but never
    turned into Python objects, which was most of a verdict's decoding time."""

    state: LedgerState
    length: int
    """Bytes; meaningful when CLOSED (0 otherwise)."""
    ctime: int | None
    custom_metadata: Mapping[str, bytes]

    def custom_text(self, key: str) -> str | None:
        """A custom metadata value as text (invalid UTF-8 is replaced, so it never matches)."""
        value = self.custom_metadata.get(key)
        return None if value is None else value.decode("utf-8", errors="replace")


def decode_ledger_summary(data: bytes, *, ledger_id: int, path: str) -> LedgerSummary:
    """`decode_ledger_metadata` cut to what a decision reads: the same fields with the same
    values, and `CorruptMetadata` for exactly the same bytes. The binary format (v3, what
    BookKeeper writes since 4.9) is decoded here; the text formats through the full decoder."""
    version, body = _read_header(data, path)
    if version != 3:
        full = decode_ledger_metadata(data, ledger_id=ledger_id, path=path)
        return LedgerSummary(full.state, full.length, full.ctime, full.custom_metadata)
    fmt = _parse_v3(body, path)
    state = _STATES[fmt.state]
    return LedgerSummary(
        state,
        fmt.length if state is LedgerState.CLOSED else 0,
        fmt.ctime if fmt.HasField("ctime") else None,
        {entry.key: entry.value for entry in fmt.customMetadata},
    )


def encode_ledger_metadata(
    metadata: LedgerMetadata, *, format_version: int = CURRENT_FORMAT_VERSION
) -> bytes:
    """Serialize as BookKeeper would: v3 (binary, the default) or v2 (TextFormat, no cToken)."""
    fmt = _to_format(metadata, include_ctoken=format_version == 3)
    header = HEADER_PREFIX + str(format_version).encode() + b"\n"
    if format_version == 3:
        body = fmt.SerializeToString()
        return header + _encode_varint(len(body)) + body
    if format_version == 2:
        return header + text_format.MessageToString(fmt).encode()
    raise InvalidArgument("format_version", f"can encode 2 or 3, not {format_version}")


def _read_header(data: bytes, path: str) -> tuple[int, bytes]:
    if not data.startswith(HEADER_PREFIX):
        what = "empty data" if not data else "missing BookieMetadataFormatVersion header"
        raise CorruptMetadata(path, f"bad header: {what}")
    start = len(HEADER_PREFIX)
    end = data.find(b"\n", start, start + _MAX_VERSION_DIGITS + 1)
    digits = data[start:end] if end >= 0 else b""
    if not digits.isdigit():
        raise CorruptMetadata(path, "bad header: version is not a number followed by newline")
    return int(digits), data[end + 1 :]


def _parse_v3(body: bytes, path: str) -> _bk.LedgerMetadataFormat:
    size, offset = _decode_varint32(body, path)
    if len(body) - offset < size:
        raise CorruptMetadata(path, f"truncated: {size} bytes announced, {len(body) - offset} left")
    fmt = _bk.LedgerMetadataFormat()
    try:
        fmt.ParseFromString(body[offset : offset + size])
    except _message.DecodeError as e:
        raise CorruptMetadata(path, f"garbage protobuf: {e}") from e
    _check_initialized(fmt, path)
    return fmt


def _parse_v2(body: bytes, path: str) -> _bk.LedgerMetadataFormat:
    fmt = _bk.LedgerMetadataFormat()
    try:
        text_format.Parse(body.decode("utf-8"), fmt)
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise CorruptMetadata(path, f"garbage text protobuf: {e}") from e
    _check_initialized(fmt, path)
    return fmt


def _check_initialized(fmt: _bk.LedgerMetadataFormat, path: str) -> None:
    # Python's protobuf parses proto2 messages with unset required fields without complaint.
    if not fmt.IsInitialized():
        missing = missing_required_fields(fmt)
        raise CorruptMetadata(path, f"garbage protobuf: missing required {missing}")


def _parse_v1(body: bytes, ledger_id: int, path: str) -> LedgerMetadata:
    try:
        return _parse_v1_lines(body.decode("utf-8").split("\n"), ledger_id)
    except (UnicodeDecodeError, ValueError, IndexError) as e:
        raise CorruptMetadata(path, f"garbage v1 text: {e}") from e


def _parse_v1_lines(lines: list[str], ledger_id: int) -> LedgerMetadata:
    quorum, ensemble, length = int(lines[0]), int(lines[1]), int(lines[2])
    segments: list[Segment] = []
    state, last_entry_id = LedgerState.OPEN, -1
    for line in lines[3:]:
        if not line:
            continue
        parts = line.split("\t")
        if parts[1] == "CLOSED":
            if int(parts[0]) == _V1_IN_RECOVERY:
                state = LedgerState.IN_RECOVERY
            else:
                state, last_entry_id = LedgerState.CLOSED, int(parts[0])
            break
        segments.append(Segment(int(parts[0]), tuple(parts[1:])))
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=ensemble,
        write_quorum=quorum,
        ack_quorum=quorum,
        state=state,
        length=length if state is LedgerState.CLOSED else 0,
        last_entry_id=last_entry_id,
        segments=tuple(sorted(segments, key=lambda s: s.first_entry_id)),
        digest_type=None,
        password=None,
        format_version=1,
    )


_STATES = {state.value: state for state in LedgerState}
_DIGESTS = {digest.value: digest for digest in DigestType}


def _from_format(fmt: _bk.LedgerMetadataFormat, ledger_id: int, version: int) -> LedgerMetadata:
    # This runs for every ledger a scan or the verifier reads: dict lookups instead of enum
    # calls, and no sort when the segments are already in order (as BookKeeper writes them).
    state = _STATES[fmt.state]
    closed = state is LedgerState.CLOSED
    has_password = fmt.HasField("password")
    digest = _DIGESTS[fmt.digestType] if has_password and fmt.HasField("digestType") else None
    segments = tuple([Segment(s.firstEntryId, tuple(s.ensembleMember)) for s in fmt.segment])
    if any(a.first_entry_id > b.first_entry_id for a, b in itertools.pairwise(segments)):
        segments = tuple(sorted(segments, key=lambda s: s.first_entry_id))
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=fmt.ensembleSize,
        write_quorum=fmt.quorumSize,
        ack_quorum=fmt.ackQuorumSize if fmt.HasField("ackQuorumSize") else fmt.quorumSize,
        state=state,
        length=fmt.length if closed else 0,
        last_entry_id=fmt.lastEntryId if closed and fmt.HasField("lastEntryId") else -1,
        segments=segments,
        digest_type=digest,
        password=fmt.password if has_password else None,
        ctime=fmt.ctime if fmt.HasField("ctime") else None,
        custom_metadata={entry.key: entry.value for entry in fmt.customMetadata},
        ctoken=fmt.cToken,
        format_version=version,
    )


def _to_format(metadata: LedgerMetadata, *, include_ctoken: bool) -> _bk.LedgerMetadataFormat:
    check_ledger_id(metadata.ledger_id)
    fmt = _bk.LedgerMetadataFormat(
        quorumSize=metadata.write_quorum,
        ensembleSize=metadata.ensemble_size,
        length=metadata.length,
        state=int(metadata.state),  # type: ignore[arg-type]
        ackQuorumSize=metadata.ack_quorum,
    )
    if metadata.state is LedgerState.CLOSED:
        fmt.lastEntryId = metadata.last_entry_id
    for segment in sorted(metadata.segments, key=lambda s: s.first_entry_id):
        fmt.segment.add(firstEntryId=segment.first_entry_id, ensembleMember=segment.ensemble)
    if metadata.digest_type is not None:
        fmt.digestType = int(metadata.digest_type)  # type: ignore[assignment]
    if metadata.password is not None:
        fmt.password = metadata.password
    if metadata.ctime is not None:
        fmt.ctime = metadata.ctime
    for key, value in metadata.custom_metadata.items():
        fmt.customMetadata.add(key=key, value=value)
    if include_ctoken and metadata.ctoken:
        fmt.cToken = metadata.ctoken
    return fmt


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_varint32(data: bytes, path: str) -> tuple[int, int]:
    """Read a varint32 length prefix; return (value, bytes consumed)."""
    value = 0
    for index in range(min(len(data), 5)):
        byte = data[index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            return value, index + 1
    if len(data) < 5:
        raise CorruptMetadata(path, "truncated: the varint length prefix is cut short")
    raise CorruptMetadata(path, "bad length prefix: varint longer than 5 bytes")


def encode_raw_ledger_metadata(metadata: LedgerMetadata) -> bytes:
    """The bare binary `LedgerMetadataFormat` (no header, no length prefix), as an offload
    index object carries it (`OffloadUtils.buildLedgerMetadataFormat`)."""
    return _to_format(metadata, include_ctoken=False).SerializeToString()


def decode_raw_ledger_metadata(data: bytes, *, ledger_id: int, path: str) -> LedgerMetadata:
    """Decode a bare binary `LedgerMetadataFormat`; `CorruptMetadata` naming `path` if invalid."""
    fmt = _bk.LedgerMetadataFormat()
    try:
        fmt.ParseFromString(data)
    except _message.DecodeError as e:
        raise CorruptMetadata(path, f"garbage protobuf: {e}") from e
    _check_initialized(fmt, path)
    return _from_format(fmt, ledger_id, CURRENT_FORMAT_VERSION)
