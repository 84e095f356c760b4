"""Codecs of Pulsar's znodes: ManagedLedgerInfo, ManagedCursorInfo, SchemaLocator.

Formats reference, sections 5.3 and 6. ML and cursor znodes are raw binary protobuf, or the
compressed form: magic 0x4778 (2 bytes, big-endian), a 4-byte big-endian metadata size, a
`Managed{Ledger,Cursor}InfoMetadata` message, then the compressed payload. As in Pulsar, a
payload that fails to decompress is retried as a raw message; only when both fail is the
znode corrupt. Zero bytes are an empty ManagedLedgerInfo (a freshly created topic).
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import TypeVar

import cramjam
from google.protobuf import message as _message

from services.core.errors import InvalidArgument
from services.metadata.errors import CorruptMetadata, missing_required_fields
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.formats import schema_pb2 as _schema

COMPRESSION_MAGIC = 0x4778
_HEADER = struct.Struct(">HI")
# Pulsar's default `managed*InfoCompressionThresholdInBytes` (3.1+).
DEFAULT_COMPRESSION_THRESHOLD = 16384

ManagedLedgerInfo = _ml.ManagedLedgerInfo
LedgerInfo = _ml.ManagedLedgerInfo.LedgerInfo
ManagedCursorInfo = _ml.ManagedCursorInfo
SchemaLocator = _schema.SchemaLocator

_Msg = TypeVar("_Msg", bound=_message.Message)
_CompressionMeta = _ml.ManagedLedgerInfoMetadata | _ml.ManagedCursorInfoMetadata


SHADOW_SOURCE = "PULSAR.SHADOW_SOURCE"
"""The ML property that makes a managed ledger a shadow topic's (PIP-180,
`ShadowManagedLedgerImpl`): it names the source topic, whose ledger list the shadow copies."""


class CompressionType(enum.IntEnum):
    """`MLDataFormats.CompressionType`."""

    NONE = 0
    LZ4 = 1
    ZLIB = 2
    ZSTD = 3
    SNAPPY = 4


def decode_managed_ledger_info(data: bytes, *, path: str) -> _ml.ManagedLedgerInfo:
    """Decode an ML znode (raw or compressed); `CorruptMetadata` naming `path` on failure."""
    return _decode(data, _ml.ManagedLedgerInfo, _ml.ManagedLedgerInfoMetadata, path)


def decode_cursor_info(data: bytes, *, path: str) -> _ml.ManagedCursorInfo:
    """Decode a cursor znode (raw or compressed)."""
    return _decode(data, _ml.ManagedCursorInfo, _ml.ManagedCursorInfoMetadata, path)


def encode_managed_ledger_info(
    info: _ml.ManagedLedgerInfo,
    *,
    compression: CompressionType = CompressionType.NONE,
    threshold_bytes: int = 0,
) -> bytes:
    """Serialize an ML znode; compressed only if `compression` is set and size > threshold."""
    return _encode(info, _ml.ManagedLedgerInfoMetadata(), compression, threshold_bytes)


def encode_cursor_info(
    info: _ml.ManagedCursorInfo,
    *,
    compression: CompressionType = CompressionType.NONE,
    threshold_bytes: int = 0,
) -> bytes:
    """Serialize a cursor znode, with the same compression rule as the ML znode."""
    return _encode(info, _ml.ManagedCursorInfoMetadata(), compression, threshold_bytes)


def decode_schema_locator(data: bytes, *, path: str) -> _schema.SchemaLocator:
    """Decode a `/schemas/<id>` znode (raw binary SchemaLocator)."""
    try:
        return _parse(data, _schema.SchemaLocator)
    except _message.DecodeError as e:
        raise CorruptMetadata(path, f"garbage protobuf: {e}") from e


def encode_schema_locator(locator: _schema.SchemaLocator) -> bytes:
    """Serialize a schema locator; all required fields must be set."""
    _require_initialized(locator, "locator")
    return locator.SerializeToString()


def compress(payload: bytes, compression: CompressionType) -> bytes:
    """Compress as Pulsar's `CompressionCodecProvider` codecs do."""
    match compression:
        case CompressionType.NONE:
            return payload
        case CompressionType.LZ4:
            # A raw LZ4 block (airlift Lz4Compressor): no frame, no size prefix.
            return bytes(cramjam.lz4.compress_block(payload, store_size=False))
        case CompressionType.ZLIB:
            # java.util.zip.Deflater() defaults to the zlib wrapper (RFC 1950), level 6.
            return zlib.compress(payload)
        case CompressionType.ZSTD:
            return bytes(cramjam.zstd.compress(payload))
        case CompressionType.SNAPPY:
            # Snappy.compress (xerial) writes the raw format, not the framing format.
            return bytes(cramjam.snappy.compress_raw(payload))


def decompress(payload: bytes, compression: CompressionType, uncompressed_size: int) -> bytes:
    """Inverse of `compress`; raises ValueError (or a codec error) on bad input."""
    match compression:
        case CompressionType.NONE:
            out = payload
        case CompressionType.LZ4:
            out = bytes(cramjam.lz4.decompress_block(payload, output_len=uncompressed_size))
        case CompressionType.ZLIB:
            out = zlib.decompress(payload)
        case CompressionType.ZSTD:
            out = bytes(cramjam.zstd.decompress(payload))
        case CompressionType.SNAPPY:
            out = bytes(cramjam.snappy.decompress_raw(payload))
    if len(out) != uncompressed_size:
        raise ValueError(f"decompressed {len(out)} bytes, metadata says {uncompressed_size}")
    return out


def _decode(data: bytes, cls: type[_Msg], meta_cls: type[_CompressionMeta], path: str) -> _Msg:
    if data[:2] != COMPRESSION_MAGIC.to_bytes(2, "big"):
        try:
            return _parse(data, cls)
        except _message.DecodeError as e:
            raise CorruptMetadata(path, f"garbage protobuf: {e}") from e
    try:
        return _parse(_decompress_framed(data, meta_cls), cls)
    except Exception as compressed_error:
        try:
            return _parse(data, cls)
        except _message.DecodeError:
            pass
        raise CorruptMetadata(
            path, f"decompression failed ({compressed_error}) and the raw bytes do not parse"
        ) from compressed_error


def _decompress_framed(data: bytes, meta_cls: type[_CompressionMeta]) -> bytes:
    if len(data) < _HEADER.size:
        raise ValueError("truncated compression header")
    _magic, meta_size = _HEADER.unpack_from(data)
    meta_end = _HEADER.size + meta_size
    if meta_end > len(data):
        raise ValueError(f"truncated: metadata size {meta_size} exceeds the data")
    meta = _parse(data[_HEADER.size : meta_end], meta_cls)
    try:
        compression = CompressionType(meta.compressionType)
    except ValueError:
        raise ValueError(f"unknown compression type {meta.compressionType}") from None
    return decompress(data[meta_end:], compression, meta.uncompressedSize)


def _encode(
    info: _Msg, meta: _CompressionMeta, compression: CompressionType, threshold_bytes: int
) -> bytes:
    _require_initialized(info, "info")
    raw = info.SerializeToString()
    if compression is CompressionType.NONE or len(raw) <= threshold_bytes:
        return raw
    meta.compressionType = int(compression)  # type: ignore[assignment]
    meta.uncompressedSize = len(raw)
    meta_bytes = meta.SerializeToString()
    header = _HEADER.pack(COMPRESSION_MAGIC, len(meta_bytes))
    return header + meta_bytes + compress(raw, compression)


def _parse(data: bytes, cls: type[_Msg]) -> _Msg:
    """Parse binary protobuf; raises DecodeError when required fields are missing too."""
    msg = cls()
    msg.ParseFromString(data)
    if not msg.IsInitialized():
        missing = missing_required_fields(msg)
        raise _message.DecodeError(f"missing required fields: {missing}")
    return msg


def _require_initialized(msg: _message.Message, field: str) -> None:
    if not msg.IsInitialized():
        missing = missing_required_fields(msg)
        raise InvalidArgument(field, f"missing required fields: {missing}")
