"""Hand encoding of protobuf fields, so tests can build znode bytes from the reference tables
without going through the code under test."""

from __future__ import annotations


def varint(value: int) -> bytes:
    value %= 2**64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def vfield(number: int, value: int) -> bytes:
    """A varint field (wire type 0)."""
    return varint(number << 3) + varint(value)


def lfield(number: int, payload: bytes | str) -> bytes:
    """A length-delimited field (wire type 2)."""
    data = payload.encode() if isinstance(payload, str) else payload
    return varint((number << 3) | 2) + varint(len(data)) + data
