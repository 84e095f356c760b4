"""What an owner stopped referencing between two of its entries (pure).

For a managed ledger: every ledger dropped from the list (each tier it had: LEDGER unless
its context said `bookkeeperDeleted`, OFFLOAD_LEDGER when the context carried a uuid); the
BookKeeper copy of a listed ledger whose context gained `bookkeeperDeleted`, or of a ledger
first seen (a new owner, or a ledger new to the list) with `bookkeeperDeleted` already set:
the writes that listed it and flagged it can fall between two reads of the owner, and the
flag alone says the owner no longer needs that copy; the objects of
an upload whose uuid the list no longer names for that ledger (a new upload replaced it).
For a cursor: its previous `cursorsLedgerId`; the compacted ledger its `CompactedTopicLedger`
property named once the property names another (a compaction moved it); the bucket ledgers
its `#pulsar.internal.delayed.bucket_*` properties no longer name (a merge, a bucket sealed
and dropped). For a schema: the versions' ledgers no longer
in the locator. For an owner deleted (or deleted and created again: another czxid): all it
referenced.

A compacted ledger is never unlinked by the property disappearing: a znode write of an
active cursor can omit it while the live reference is in the cursor ledger (`carried`).

The fence token is the owner's version at which it no longer references the ledgers: the
version read. For a deleted owner it is 0: no version of a znode created again under the
same name references them (ledger ids are never reused), and the verifier treats an absent
owner as having unlinked everything.

`seen_ms` is when the store wrote the last version the index held that still named the
ledgers that left (its `mtime`): they existed then, and an owner unlinks before its ledger
is deleted, so a ledger created under one of their ids later is another one (the intents
carry it as `seen_at_ms`, docs/oxia.md). It does not cover what that version did not itself
name: the BookKeeper copy of a ledger first seen already flagged `bookkeeperDeleted` (the
follower never saw that copy referenced) and a compacted ledger (the entry may name one it
carried from an earlier version, `carried`). Those are in `unseen` and `compacted`, whose
intents carry no `seen_at_ms`.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from services.marker.follower.index import (
    COMPACTED,
    CZXID,
    VERSION,
    Drivers,
    buckets_of,
    compacted_of,
    cursor_ledger,
    kind_of,
    ledger_ids,
    ml_refs,
    seen_of,
)
from services.marker.follower.owner_paths import Kind
from services.marker.owners import LedgerRef
from tombstone.v1 import pending_delete_pb2 as _pd

DELETED_TOKEN = 0


@dataclass(frozen=True)
class Unlinked:
    """Ledgers (with the tiers that left) one owner no longer references as of `token`."""

    refs: tuple[LedgerRef, ...]
    token: int
    previous_version: int
    """The version the owner had before (the marker's own write reads it first)."""
    compacted: tuple[int, ...] = ()
    """Compacted ledgers a `__compaction` cursor no longer references (COMPACTED_LEDGER)."""
    buckets: tuple[int, ...] = ()
    """Bucket snapshot ledgers a cursor no longer references (DELAYED_INDEX_BUCKET)."""
    seen_ms: int = 0
    """When the store wrote the last indexed version naming `refs` and `buckets` (0:
    unknown)."""
    unseen: tuple[LedgerRef, ...] = ()
    """BookKeeper copies first seen flagged `bookkeeperDeleted`: left, never seen listed."""


def stale(old: array[int] | None, new: array[int] | None) -> bool:
    """`new` is not newer than `old` (same znode, version not above): nothing to apply."""
    if old is None or new is None or old[CZXID] != new[CZXID]:
        return False
    return new[VERSION] <= old[VERSION]


def carried(old: array[int] | None, new: array[int] | None) -> array[int] | None:
    """`new` as the index keeps it: a cursor whose znode omits the compacted ledger the
    previous version of the same znode named keeps naming it.

    `ManagedCursorImpl.switchToNewLedger` wrote the switch as a `ManagedCursorInfo` holding
    only the new `cursorsLedgerId` in older releases, then through `persistPositionMetaStore`
    without the mark-delete properties; only current releases pass
    `lastMarkDeleteEntry.properties`. `recoverFromLedger`'s rollback (`initialize` with an
    empty map) still writes no properties. Only
    `persistPositionMetaStore` when closing (`persistPositionWhenClosing`) or after a failed
    cursor-ledger write (`persistPositionToMetaStore`) reliably names the current value. While
    `cursorsLedgerId >= 0` the live value is in the cursor ledger's last `PositionInfo`,
    which only moves forward (`AbstractTwoPhaseCompactor.phaseTwo` marks each new compacted
    ledger; `CompactedTopicImpl.newCompactedLedger` then deletes the previous one). So the
    last value named stays the one to unlink when a later write names another; a property
    that only disappeared unlinks nothing."""
    if old is None or new is None or kind_of(new) is not Kind.CURSOR:
        return new
    if old[CZXID] != new[CZXID] or compacted_of(new) >= 0 or compacted_of(old) < 0:
        return new
    kept = array("q", new)
    if len(kept) > COMPACTED:
        kept[COMPACTED] = compacted_of(old)
    else:
        kept.append(compacted_of(old))
    return kept


def unlinked(old: array[int] | None, new: array[int] | None, drivers: Drivers) -> Unlinked:
    """What left between `old` (as indexed) and `new` (as read and `carried`; None:
    deleted)."""
    if old is None:
        if new is None:
            return Unlinked((), 0, -1)
        flagged = _first_seen_flagged({}, new, drivers) if kind_of(new) is Kind.ML else ()
        return Unlinked((), new[VERSION], -1, unseen=flagged)
    previous = old[VERSION]
    if new is None or new[CZXID] != old[CZXID]:
        return _everything(old, drivers, previous)
    kind = kind_of(old)
    if kind is Kind.CURSOR:
        return _cursor_dropped(old, new)
    unseen: tuple[LedgerRef, ...] = ()
    if kind is Kind.ML:
        refs = _ml_dropped(old, new, drivers)
        unseen = _first_seen_flagged(ml_refs(old, drivers), new, drivers)
    else:
        kept = set(ledger_ids(new))
        refs = tuple(LedgerRef(i) for i in ledger_ids(old) if i not in kept)
    return Unlinked(refs, new[VERSION], previous, seen_ms=seen_of(old), unseen=unseen)


def _everything(entry: array[int], drivers: Drivers, previous: int) -> Unlinked:
    """All a deleted owner referenced (for a cursor, its properties' ledgers too)."""
    seen = seen_of(entry)
    if kind_of(entry) is Kind.ML:
        refs = tuple(ref for ref in ml_refs(entry, drivers).values() if ref.tiers)
        return Unlinked(refs, DELETED_TOKEN, previous, seen_ms=seen)
    if kind_of(entry) is Kind.CURSOR:
        ledger, compacted = cursor_ledger(entry), compacted_of(entry)
        return Unlinked(
            tuple(LedgerRef(i) for i in (ledger,) if i >= 0),
            DELETED_TOKEN,
            previous,
            compacted=(compacted,) if compacted >= 0 else (),
            buckets=tuple(buckets_of(entry)),
            seen_ms=seen,
        )
    refs = tuple(LedgerRef(i) for i in ledger_ids(entry))
    return Unlinked(refs, DELETED_TOKEN, previous, seen_ms=seen)


def _cursor_dropped(old: array[int], new: array[int]) -> Unlinked:
    """The cursor ledger switched away from, the compacted ledger a later write replaced
    with another, and the bucket ledgers no longer named."""
    was, now = cursor_ledger(old), cursor_ledger(new)
    refs = (LedgerRef(was),) if was >= 0 and was != now else ()
    was_compacted, now_compacted = compacted_of(old), compacted_of(new)
    moved = was_compacted >= 0 and now_compacted >= 0 and now_compacted != was_compacted
    compacted = (was_compacted,) if moved else ()
    kept = set(buckets_of(new))
    buckets = tuple(i for i in buckets_of(old) if i not in kept)
    return Unlinked(
        refs, new[VERSION], old[VERSION], compacted=compacted, buckets=buckets, seen_ms=seen_of(old)
    )


def _ml_dropped(old: array[int], new: array[int], drivers: Drivers) -> tuple[LedgerRef, ...]:
    before, after = ml_refs(old, drivers), ml_refs(new, drivers)
    out: list[LedgerRef] = []
    for ledger_id, was in before.items():
        now = after.get(ledger_id)
        if now is None:
            if was.tiers:
                out.append(was)
            continue
        if _pd.LEDGER in was.tiers and _bk_deleted(now):
            out.append(LedgerRef(ledger_id, (_pd.LEDGER,), now.offload))
        if _pd.OFFLOAD_LEDGER in was.tiers and not _same_upload(was, now):
            out.append(LedgerRef(ledger_id, (_pd.OFFLOAD_LEDGER,), was.offload))
    return tuple(out)


def _first_seen_flagged(
    before: dict[int, LedgerRef], new: array[int], drivers: Drivers
) -> tuple[LedgerRef, ...]:
    """The BookKeeper copies of ledgers `before` did not list that `new` lists already
    flagged `bookkeeperDeleted`: unlinked from BookKeeper in writes the index never saw."""
    return tuple(
        LedgerRef(ledger_id, (_pd.LEDGER,), now.offload)
        for ledger_id, now in ml_refs(new, drivers).items()
        if ledger_id not in before and _bk_deleted(now)
    )


def _bk_deleted(ref: LedgerRef) -> bool:
    return ref.offload is not None and ref.offload.bookkeeper_deleted


def _same_upload(was: LedgerRef, now: LedgerRef) -> bool:
    if now.offload is None or _pd.OFFLOAD_LEDGER not in now.tiers or was.offload is None:
        return False
    return (was.offload.uuid_msb, was.offload.uuid_lsb) == (
        now.offload.uuid_msb,
        now.offload.uuid_lsb,
    )
