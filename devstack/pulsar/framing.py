"""Pulsar frames: length-prefixed `BaseCommand`s, with a checksummed payload for SEND/MESSAGE.

A stored entry is kept exactly as the producer sent it after the command
(`magic 0x0e01 | crc32c | metadata_size | metadata | payload`), so a MESSAGE frame is the
command followed by those bytes and the consumer verifies the producer's own checksum.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc

from tombstone.wire import pulsar_api_pb2 as _pb

MAGIC_CRC32C = b"\x0e\x01"
# Pulsar's documented frame limit plus the padding a chunk frame needs above max_message_size.
MAX_MESSAGE_SIZE = 5 * 1024 * 1024
MAX_FRAME_SIZE = MAX_MESSAGE_SIZE + 10 * 1024
_U32 = struct.Struct(">I")
_U32X2 = struct.Struct(">II")
_CRC_AND_SIZE = struct.Struct(">II")


class FrameError(Exception):
    """The peer sent bytes that are not a valid Pulsar frame; its connection must close."""


class ChecksumMismatch(FrameError):
    """A SEND payload whose CRC-32C does not match the one the producer wrote."""


def crc32c(data: bytes | memoryview) -> int:
    """CRC-32C (Castagnoli), the checksum Pulsar puts in payload frames."""
    return int(_crc.crc32c(data))


def encode_command(command: _pb.BaseCommand) -> bytes:
    """A simple frame: total size, command size, command."""
    body = command.SerializeToString()
    return _U32X2.pack(len(body) + 4, len(body)) + body


def encode_payload_command(command: _pb.BaseCommand, stored: bytes) -> bytes:
    """A payload frame: the command followed by a stored entry (magic, checksum, metadata...)."""
    body = command.SerializeToString()
    return b"".join((_U32X2.pack(len(body) + 4 + len(stored), len(body)), body, stored))


@dataclass(frozen=True, slots=True)
class Payload:
    """The part of a SEND frame after the command."""

    stored: bytes
    """magic + checksum + metadata size + metadata + payload, as it will be dispatched."""
    metadata: bytes
    """The serialized MessageMetadata."""


def split_payload(rest: bytes) -> Payload:
    """Check the checksum of a SEND payload and return it in its stored form.

    A payload without the magic (protocol < 6) gets a checksum computed here, so every stored
    entry has the same layout.
    """
    if rest[:2] == MAGIC_CRC32C:
        if len(rest) < 10:
            raise FrameError("payload shorter than its checksum header")
        checksum, meta_size = _CRC_AND_SIZE.unpack_from(rest, 2)
        covered = memoryview(rest)[6:]
        if crc32c(covered) != checksum:
            raise ChecksumMismatch("payload checksum does not match")
        start = 10
        stored = rest
    else:
        if len(rest) < 4:
            raise FrameError("payload shorter than its metadata size")
        (meta_size,) = _U32.unpack_from(rest, 0)
        start = 4
        stored = MAGIC_CRC32C + _U32.pack(crc32c(rest)) + rest
        start += 6
        rest = stored
    if start + meta_size > len(rest):
        raise FrameError("metadata size exceeds the frame")
    return Payload(stored=stored, metadata=rest[start : start + meta_size])


def stored_metadata(stored: bytes) -> bytes:
    """The serialized MessageMetadata inside a stored entry."""
    (meta_size,) = _U32.unpack_from(stored, 6)
    return stored[10 : 10 + meta_size]


class FrameReader:
    """Splits a byte stream into frames; several frames may arrive in one read."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._buffer = bytearray()
        self._max = max_frame_size

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """Add bytes; return the complete frames as (command bytes, bytes after the command)."""
        self._buffer += data
        frames: list[tuple[bytes, bytes]] = []
        buf = self._buffer
        offset = 0
        while len(buf) - offset >= 4:
            (total,) = _U32.unpack_from(buf, offset)
            if total < 4 or total > self._max:
                raise FrameError(f"frame size {total} outside 4..{self._max}")
            if len(buf) - offset - 4 < total:
                break
            (cmd_size,) = _U32.unpack_from(buf, offset + 4)
            if cmd_size > total - 4:
                raise FrameError(f"command size {cmd_size} exceeds frame size {total}")
            start = offset + 8
            frames.append(
                (
                    bytes(buf[start : start + cmd_size]),
                    bytes(buf[start + cmd_size : offset + 4 + total]),
                )
            )
            offset += 4 + total
        if offset:
            del buf[:offset]
        return frames

    @property
    def pending(self) -> int:
        """Bytes received that do not form a complete frame yet."""
        return len(self._buffer)


def parse_command(data: bytes) -> _pb.BaseCommand:
    """Parse a BaseCommand strictly (proto2 required fields included)."""
    command = _pb.BaseCommand()
    try:
        command.ParseFromString(data)
    except Exception as exc:  # the protobuf runtime raises DecodeError or RuntimeError
        raise FrameError(f"unparsable command: {exc}") from exc
    if not command.IsInitialized():
        raise FrameError("command lacks required fields")
    return command
