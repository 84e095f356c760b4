"""The follower in the simulation: its wall-clock reads on virtual time, and what it knew.

L1 holds for an unmodified broker's unlink only if the follower could know the ledger: the
unlinks docs/follower.md lists under "What only the reconciler can catch" are excluded. They
are told apart by the follower's knowledge, tracked per lineage of its index:

- a lineage begins when an index is filled from nothing (the first start: its full read) or
  from a checkpoint (the knowledge the checkpoint's writer had when it wrote it);
- every entry the follower puts into its index adds the copies it references: the lineage
  knew them (the union over time: an entry replaced later was known all the same);
- a crash ends the lineage (the index is in memory); a checkpoint carries it on.

At the end of a run, the copies the leading follower's lineage ever knew are the ones its
diff must have turned into PDLIs when they left their owner. The others were listed and
unlinked while no follower held them in an index that survived: listed after the last
checkpoint and unlinked while no follower ran (or before the one that read them published
and checkpointed), listed and unlinked between two reads, or orphaned before the first start.
The tracking swaps `OwnerIndex.put` and `.replace` and the checkpoint's `compress` and
`decompress` for the run; it only records, and changes nothing the follower does.
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Callable, Iterator
from typing import Any

import services.marker.follower.checkpoint as checkpoint
import services.marker.follower.follower as follower
import services.verifier.believed.replica as believed
from services.marker.follower.index import OwnerIndex, kind_of, ledger_ids, ml_refs
from services.marker.follower.owner_paths import Kind
from services.metadata.offload import uuid_from_bits
from tombstone.v1 import pending_delete_pb2 as _pd

LEDGER, OFFLOAD = "ledger", "offload"
Copy = tuple[int, str, str]
_KNOWN = "sim_known"
"""The attribute of an `OwnerIndex` holding its lineage's knowledge (a set of copies)."""


def known(index: OwnerIndex) -> set[Copy]:
    found: set[Copy] | None = getattr(index, _KNOWN, None)
    if found is None:
        found = set()
        setattr(index, _KNOWN, found)
    return found


def copies_of(entry: array[int], index: OwnerIndex) -> list[Copy]:
    """The copies an index entry references (as the world's reference tracking names them)."""
    if kind_of(entry) is not Kind.ML:
        return [(i, LEDGER, "") for i in ledger_ids(entry)]
    out: list[Copy] = []
    for ledger_id, ref in ml_refs(entry, index.drivers).items():
        if _pd.LEDGER in ref.tiers:
            out.append((ledger_id, LEDGER, ""))
        if _pd.OFFLOAD_LEDGER in ref.tiers and ref.offload is not None:
            uuid = uuid_from_bits(ref.offload.uuid_msb, ref.offload.uuid_lsb)
            out.append((ledger_id, OFFLOAD, uuid))
    return out


class _Clock:
    """The two reads of the `time` module the follower and its checkpoint make."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def monotonic(self) -> float:
        return self._now()

    def time_ns(self) -> int:
        return round(self._now() * 1_000_000) * 1000


@contextlib.contextmanager
def following(now: Callable[[], float], now_ms: Callable[[], int]) -> Iterator[None]:
    """Virtual time for the follower, and its knowledge tracked (see the module docstring)."""
    put, replace = OwnerIndex.put, OwnerIndex.replace
    compress, decompress = checkpoint.compress, checkpoint.decompress
    written: dict[bytes, frozenset[Copy]] = {}

    def tracked_put(self: OwnerIndex, path: str, entry: array[int] | None) -> None:
        put(self, path, entry)
        if entry is not None:
            known(self).update(copies_of(entry, self))

    def tracked_replace(self: OwnerIndex, entries: dict[str, array[int]]) -> None:
        known(self).clear()  # a new lineage: a first read, nothing known before it
        replace(self, entries)

    def tracked_compress(index: OwnerIndex) -> bytes:
        blob = compress(index)
        written[blob] = frozenset(known(index))
        return blob

    def tracked_decompress(blob: bytes) -> OwnerIndex:
        index = decompress(blob)
        setattr(index, _KNOWN, set(written.get(blob, frozenset())))
        return index

    saved: list[tuple[Any, str, Any]] = [
        (OwnerIndex, "put", tracked_put),
        (OwnerIndex, "replace", tracked_replace),
        (checkpoint, "compress", tracked_compress),
        (checkpoint, "decompress", tracked_decompress),
        (checkpoint, "time", _Clock(now)),
        (follower, "time", _Clock(now)),
        (believed, "time", _Clock(now)),  # the verifier's believed set's resync timer
        (follower, "_now_ms", now_ms),
    ]
    undo = [(target, name, getattr(target, name)) for target, name, _ in saved]
    for target, name, value in saved:
        setattr(target, name, value)
    try:
        yield
    finally:
        for target, name, value in undo:
            setattr(target, name, value)
