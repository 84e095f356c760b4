"""Hand-encoded frames for the two hot paths: SEND_RECEIPT and MESSAGE.

Building these through protobuf objects costs more than everything else the broker does per
message. The bytes are the same a protobuf serializer produces for the fields set here
(tests compare both), so the client cannot tell the difference.
"""

from __future__ import annotations

import struct

_U32X2 = struct.Struct(">II")
_TYPE_SEND_RECEIPT = b"\x08\x07"  # field 1 (type), varint 7
_TYPE_MESSAGE = b"\x08\x09"  # field 1 (type), varint 9
_SEND_RECEIPT_FIELD = 0x3A  # field 7, length-delimited
_MESSAGE_FIELD = 0x4A  # field 9, length-delimited


def varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative numbers as 64-bit two's complement (int32/int64)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + varint(len(body)) + body


def message_id(ledger_id: int, entry_id: int, partition: int = -1) -> bytes:
    """A serialized MessageIdData with ledgerId, entryId and (if >= 0) partition."""
    body = b"\x08" + varint(ledger_id) + b"\x10" + varint(entry_id)
    if partition >= 0:
        body += b"\x18" + varint(partition)
    return body


def send_receipt_frame(producer_id: int, sequence_id: int, ledger_id: int, entry_id: int) -> bytes:
    receipt = (
        b"\x08"
        + varint(producer_id)
        + b"\x10"
        + varint(sequence_id)
        + _length_delimited(0x1A, message_id(ledger_id, entry_id))
    )
    command = _TYPE_SEND_RECEIPT + _length_delimited(_SEND_RECEIPT_FIELD, receipt)
    return _U32X2.pack(len(command) + 4, len(command)) + command


def message_frame(
    consumer_id: int,
    id_bytes: bytes,
    redelivery_count: int,
    ack_set: list[int] | None,
    stored: bytes,
) -> bytes:
    """A MESSAGE frame around a stored entry; `id_bytes` from `message_id()`."""
    body = b"\x08" + varint(consumer_id) + _length_delimited(0x12, id_bytes)
    if redelivery_count:
        body += b"\x18" + varint(redelivery_count)
    if ack_set:
        body += b"".join(b"\x20" + varint(word) for word in ack_set)
    command = _TYPE_MESSAGE + _length_delimited(_MESSAGE_FIELD, body)
    return b"".join((_U32X2.pack(len(command) + 4 + len(stored), len(command)), command, stored))
