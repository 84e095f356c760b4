"""The believed set's form in the store: its names, its identity keys and its batch encoding.

A batch znode is `MAGIC`, then the entry count, then per entry the ledger id and a 64-bit
digest of the rest of the identity (`identity_key`); buckets are `<13-digit slot ms>-<roll>`
and batches `b-<10-digit sequence>`, under `<root>/<LAYOUT>`.
"""

from __future__ import annotations

import array
import hashlib
import re
import struct
import sys
from collections.abc import Sequence

from services.core.errors import CorruptData
from services.verifier.model import Component, OffloadTarget, Target, Tier

MAGIC = b"TBB1"
HEADER = struct.Struct(">4sI")
LAYOUT = "v2"
"""Child of the root holding the buckets (the version of this layout)."""
BATCH_PREFIX = "b-"
BUCKET_NAME = re.compile(r"(\d{13})-(\d{4})")
BATCH_NAME = re.compile(r"b-(\d{10})")
MAX_ROLL = 9999


def bucket_name(slot_ms: int, roll: int) -> str:
    """`<13-digit ms of the slot start>-<4-digit roll>`: sorts by time, then by roll."""
    return f"{slot_ms:013d}-{roll:04d}"


def batch_name(sequence: int) -> str:
    """ZooKeeper's name for the `sequence`-th sequential child `b-`."""
    return f"{BATCH_PREFIX}{sequence:010d}"


def identity_key(target: Target) -> int:
    """`ledger_id << 64 | digest64(tier, component, owner, cursor, schema, offload identity)`.

    Any field that a forged PDLI could change without changing the ledger id changes the
    key, so a belief about ledger X of topic A never vouches for "ledger X of topic B".
    """
    return make_identity_key(
        target.ledger_id,
        target.tier,
        target.component,
        target.ml_name,
        target.cursor,
        target.schema_id,
        target.offload,
    )


def make_identity_key(
    ledger_id: int,
    tier: Tier,
    component: Component,
    ml_name: str | None,
    cursor: str | None,
    schema_id: str | None,
    offload: OffloadTarget | None,
) -> int:
    """`identity_key` from the parts, before a `Target` exists."""
    parts = [tier.value, component.value, ml_name or "", cursor or "", schema_id or ""]
    if offload is not None:
        parts += [offload.uuid, offload.driver_name]
        parts += [f"{k}={v}" for k, v in sorted(offload.driver_metadata.items())]
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return (ledger_id << 64) | int.from_bytes(digest, "big")


def key_values(keys: Sequence[int]) -> array.array[int]:
    values = array.array("Q")
    for key in keys:
        values.append(key >> 64)
        values.append(key & 0xFFFFFFFFFFFFFFFF)
    return values


def encode_batch(keys: Sequence[int]) -> bytes:
    """Header (magic, count) then each key as two big-endian uint64 (id, digest)."""
    values = key_values(keys)
    if sys.byteorder == "little":
        values.byteswap()
    return HEADER.pack(MAGIC, len(keys)) + values.tobytes()


def decode_batch(data: bytes, path: str) -> array.array[int]:
    """The flat (id, digest, id, digest...) array of a batch; `CorruptData` if malformed."""
    if len(data) < HEADER.size:
        raise CorruptData(f"{path}: believed batch truncated")
    magic, count = HEADER.unpack_from(data)
    if magic != MAGIC or len(data) != HEADER.size + 16 * count:
        raise CorruptData(f"{path}: not a believed batch (magic {magic!r}, {len(data)} bytes)")
    values = array.array("Q")
    values.frombytes(data[HEADER.size :])
    if sys.byteorder == "little":
        values.byteswap()
    return values


def keys_of(values: array.array[int]) -> list[int]:
    return [(values[i] << 64) | values[i + 1] for i in range(0, len(values), 2)]
