"""Broker-style unlinks: what an unmodified Pulsar broker (2.x to 4.x) does to its metadata
and storage, with no call to the marker, written into the real ZooKeeper and S3.

Every step follows Pulsar's source:

- **Retention trim** (`ManagedLedgerImpl.internalTrimLedgers`, run by
  `trimConsumedLedgersInBackground`): the shorter ledger list is written to the ML znode with
  one compare-and-set first (`store.asyncUpdateLedgerIds`); in the same write, offloaded
  ledgers whose deletion lag has passed get `bookkeeperDeleted=true`. Only once the write
  succeeded does the broker delete: each removed ledger from BookKeeper unless its context
  already says `bookkeeperDeleted` (`asyncDeleteLedger(long, LedgerInfo)`), and the BookKeeper
  copy of each newly flagged one (`asyncDeleteLedgerFromBookKeeper`). Those deletes make
  `DEFAULT_LEDGER_DELETE_RETRIES` (3) attempts `DEFAULT_LEDGER_DELETE_BACKOFF_TIME_SEC` (60 s)
  apart, in memory (`asyncDeleteLedgerWithRetry`); then the broker gives up and the ledger is
  orphaned for good. Offloaded objects of a removed ledger are deleted by
  `OffloadUtils.cleanupOffloaded` (`LedgerOffloader.deleteOffloaded`), whose failure is only
  logged: never retried after that.
- **Cursor ledger switch** (`ManagedCursorImpl.switchToNewLedger`): the new ledger is created
  (OPEN, positions go into it), the cursor znode is written with the new `cursorsLedgerId`,
  then the old ledger is deleted by id, once, without closing it (`asyncDeleteLedger(
  LedgerHandle)`): if that delete fails the old ledger stays OPEN and unreferenced.
- **Unsubscribe** (`ManagedLedgerImpl.asyncDeleteCursor`): the cursor znode is removed
  (`store.asyncRemoveCursor`), then the cursor's ledger is deleted once
  (`ManagedCursorImpl.asyncDeleteCursorLedger`), failure only logged.

A BookKeeper delete removes the ledger's metadata znode whatever its version
(`LedgerManager.removeLedgerMetadata(id, Version.ANY)`), then empty parents; "no such ledger"
counts as done. `DeleteFaults` injects failures: a seeded share of deletions fail at every
attempt (a bookie or S3 outage, or a broker restart that drops the in-memory retries).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from devstack.simulator.s3 import ObjectStore
from services.core.errors import InvalidArgument, TombstoneError
from services.metadata import (
    BookKeeperLedgers,
    LedgerInfo,
    LedgerMetadata,
    LedgerPaths,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgers,
    MetadataError,
    MetadataStore,
    NoNode,
    data_object_key,
    index_object_key,
    offload_location,
    uuid_from_bits,
)
from services.metadata.offload import PROP_DRIVER

BOOKKEEPER = "bookkeeper"
OFFLOAD = "offload"
LEDGER_DELETE_ATTEMPTS = 3
"""`ManagedLedgerImpl.DEFAULT_LEDGER_DELETE_RETRIES`."""
LEDGER_DELETE_BACKOFF_SECONDS = 60.0
"""`ManagedLedgerImpl.DEFAULT_LEDGER_DELETE_BACKOFF_TIME_SEC`."""

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class BrokerDelete:
    """One (ledger, tier) a broker unlinked and now deletes itself."""

    ledger_id: int
    tier: str
    """`BOOKKEEPER` (the ledger znode) or `OFFLOAD` (both objects)."""
    object_keys: tuple[str, ...] = ()
    bucket: str | None = None
    attempts: int = 1
    """In-memory attempts before the broker gives up (3 for a trim, 1 for a cursor ledger
    and for offloaded objects)."""


@dataclass(frozen=True)
class DeleteOutcome:
    item: BrokerDelete
    deleted: bool
    """Gone after the attempts (or already gone)."""
    attempts: int
    injected: bool
    """Failed because `DeleteFaults` chose it (every attempt failed)."""


class DeleteFaults:
    """A seeded share of deletions that fail at every attempt."""

    def __init__(self, share: float = 0.0, *, seed: int = 1) -> None:
        if not 0.0 <= share <= 1.0:
            raise InvalidArgument("delete_failure_share", f"must be in [0, 1], not {share}")
        self.share = share
        self._rng = random.Random(seed)
        self.injected = 0
        """Deletions chosen to fail so far."""

    def draw(self) -> bool:
        """Whether the next deletion fails (counted in `injected` when it does)."""
        fails = self.share > 0 and self._rng.random() < self.share
        self.injected += fails
        return fails


@dataclass(frozen=True)
class TrimPlan:
    """One broker trim: the list to write, then the deletions that follow it."""

    info: ManagedLedgerInfo
    removed: tuple[int, ...]
    flagged: tuple[int, ...]
    """Still listed, now `bookkeeperDeleted`: only their BookKeeper copy goes."""
    deletes: tuple[BrokerDelete, ...]


def plan_trim(
    info: ManagedLedgerInfo,
    n: int,
    *,
    flag_bookkeeper_deleted: Iterable[int] = (),
    default_bucket: str | None = None,
) -> TrimPlan:
    """Remove the `n` oldest ledgers (never the current, last one) and flag the listed,
    completely offloaded ledgers in `flag_bookkeeper_deleted`, as `internalTrimLedgers` does.

    Pulsar also writes the configured driver's metadata into a flagged context that has none
    (`OffloadUtils.setOffloadDriverMetadata`); only contexts that carry it can be flagged here.
    """
    listed = list(info.ledgerInfo)
    if not 0 <= n < len(listed):
        raise InvalidArgument("n", f"can trim 0..{max(len(listed) - 1, 0)} ledgers, not {n}")
    flag = set(flag_bookkeeper_deleted)
    after = ManagedLedgerInfo()
    after.CopyFrom(info)
    del after.ledgerInfo[:]
    deletes: list[BrokerDelete] = []
    for entry in listed[:n]:
        context = entry.offloadContext
        if not context.bookkeeperDeleted:
            deletes.append(_bookkeeper_delete(entry.ledgerId))
        deletes.extend(_object_deletes(entry, default_bucket))
    kept = listed[n:]
    for entry in kept:
        copied = after.ledgerInfo.add()
        copied.CopyFrom(entry)
        if entry.ledgerId in flag:
            _flag(copied, is_current=entry is kept[-1])
            deletes.append(_bookkeeper_delete(entry.ledgerId))
    flagged = tuple(e.ledgerId for e in kept if e.ledgerId in flag)
    if len(flagged) != len(flag):
        raise InvalidArgument("flag_bookkeeper_deleted", f"{sorted(flag)} not all kept listed")
    return TrimPlan(after, tuple(e.ledgerId for e in listed[:n]), flagged, tuple(deletes))


def _bookkeeper_delete(ledger_id: int) -> BrokerDelete:
    return BrokerDelete(ledger_id, BOOKKEEPER, attempts=LEDGER_DELETE_ATTEMPTS)


def _flag(entry: LedgerInfo, *, is_current: bool) -> None:
    context, ledger_id = entry.offloadContext, entry.ledgerId
    if is_current or not context.complete or context.bookkeeperDeleted:
        raise InvalidArgument("flag_bookkeeper_deleted", f"{ledger_id} is not a complete offload")
    if not context.driverMetadata.name:
        raise InvalidArgument("flag_bookkeeper_deleted", f"{ledger_id} has no driverMetadata")
    context.bookkeeperDeleted = True


def _object_deletes(entry: LedgerInfo, default_bucket: str | None) -> list[BrokerDelete]:
    """The offload tier of a removed ledger: both objects, when the context has a uuid and
    the driver writes objects (a filesystem offload writes none)."""
    context = entry.offloadContext
    if not context.HasField("uidMsb"):
        return []
    props = {kv.key: kv.value for kv in context.driverMetadata.properties}
    if context.driverMetadata.name:
        props.setdefault(PROP_DRIVER, context.driverMetadata.name)
    where = offload_location(props, default_bucket=default_bucket)
    if where.driver == "filesystem":
        return []
    ledger_id = entry.ledgerId
    uuid = uuid_from_bits(context.uidMsb, context.uidLsb)
    keys = (data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id))
    return [BrokerDelete(ledger_id, OFFLOAD, keys, where.bucket, attempts=1)]


class BrokerDeleter:
    """Deletes as a broker does: each deletion's attempts in memory, `backoff` apart, then
    it gives up. A store or S3 error fails the attempt like an injected one."""

    def __init__(
        self,
        store: MetadataStore,
        objects: ObjectStore | None,
        *,
        faults: DeleteFaults | None = None,
        backoff_seconds: float = LEDGER_DELETE_BACKOFF_SECONDS,
        paths_of: Callable[[int], LedgerPaths] = lambda _: LedgerPaths(),
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._store = store
        self._objects = objects
        self.faults = faults or DeleteFaults()
        self.backoff_seconds = backoff_seconds
        self._paths_of = paths_of
        self._sleep = sleep

    async def delete(self, item: BrokerDelete) -> DeleteOutcome:
        injected = self.faults.draw()
        for attempt in range(1, item.attempts + 1):
            if not injected and await self._attempt(item):
                return DeleteOutcome(item, True, attempt, False)
            if attempt < item.attempts:
                await self._sleep(self.backoff_seconds)
        return DeleteOutcome(item, False, item.attempts, injected)

    async def delete_all(self, items: Sequence[BrokerDelete]) -> list[DeleteOutcome]:
        """All at once, as the trim's callback issues them."""
        return list(await asyncio.gather(*(self.delete(item) for item in items)))

    async def _attempt(self, item: BrokerDelete) -> bool:
        try:
            if item.tier == BOOKKEEPER:
                await self._delete_ledger(item.ledger_id)
            else:
                await self._delete_objects(item)
        except (MetadataError, TombstoneError):
            return False
        return True

    async def _delete_ledger(self, ledger_id: int) -> None:
        bk = BookKeeperLedgers(self._store, paths=self._paths_of(ledger_id))
        stat = await self._store.exists(bk.path(ledger_id))
        if stat is None:
            return  # NoSuchLedgerExistsOnMetadataServer counts as deleted
        try:
            await bk.delete(ledger_id, version=stat.version)
        except NoNode:
            return

    async def _delete_objects(self, item: BrokerDelete) -> None:
        if self._objects is None or item.bucket is None:
            raise InvalidArgument("bucket", f"no object store for ledger {item.ledger_id}")
        for key in item.object_keys:
            await self._objects.delete_object(bucket=item.bucket, key=key)


@dataclass(frozen=True)
class BrokerTrim:
    ml_name: str
    version: int
    """The ML znode's version after the broker's write."""
    plan: TrimPlan
    outcomes: tuple[DeleteOutcome, ...]


async def trim_like_broker(
    mls: ManagedLedgers,
    deleter: BrokerDeleter,
    ml_name: str,
    n: int,
    *,
    flag_bookkeeper_deleted: Iterable[int] = (),
    default_bucket: str | None = None,
) -> BrokerTrim:
    """Read the list, write the shorter one with a compare-and-set, then delete."""
    record = await mls.read(ml_name)
    plan = plan_trim(
        record.value,
        n,
        flag_bookkeeper_deleted=flag_bookkeeper_deleted,
        default_bucket=default_bucket,
    )
    version = await mls.write(ml_name, plan.info, version=record.version)
    outcomes = await deleter.delete_all(plan.deletes)
    return BrokerTrim(ml_name, version, plan, tuple(outcomes))


async def switch_cursor_ledger(
    mls: ManagedLedgers,
    bk: BookKeeperLedgers,
    deleter: BrokerDeleter,
    ml_name: str,
    cursor: str,
    new_ledger: LedgerMetadata,
) -> DeleteOutcome | None:
    """`switchToNewLedger`: create the new (OPEN) cursor ledger, write its id into the
    cursor znode, then delete the old ledger once, unclosed. None if the cursor had none."""
    record = await mls.read_cursor(ml_name, cursor)
    old = record.value.cursorsLedgerId
    await bk.create(new_ledger, container_parents=True)
    info = ManagedCursorInfo()
    info.CopyFrom(record.value)
    info.cursorsLedgerId = new_ledger.ledger_id
    await mls.write_cursor(ml_name, cursor, info, version=record.version)
    if old < 0:
        return None
    return await deleter.delete(BrokerDelete(old, BOOKKEEPER))


async def unsubscribe(
    mls: ManagedLedgers, deleter: BrokerDeleter, ml_name: str, cursor: str
) -> DeleteOutcome | None:
    """`asyncDeleteCursor`: remove the cursor znode, then delete its ledger once, unclosed.
    None if the cursor had no ledger (closed cleanly, position kept in the znode)."""
    record = await mls.read_cursor(ml_name, cursor)
    await mls.delete_cursor(ml_name, cursor, version=record.version)
    old = record.value.cursorsLedgerId
    if old < 0:
        return None
    return await deleter.delete(BrokerDelete(old, BOOKKEEPER))
