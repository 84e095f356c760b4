"""The follower's loop: lead, watch, read what changed, diff, publish, and keep the index.

    acquire leadership → addWatch /managed-ledgers and /schemas → full read, diffed against
    the index (or, at start, the checkpoint) → per batch of changed znodes: multiRead, diff
    each against its entry, publish the PDLIs of what left → update the entries whose PDLIs
    were all accepted → checkpoint now and then

Events only name a znode; the follower reads its current state, so events that arrive late,
twice or coalesced change nothing. The index only moves forward once the PDLIs of a change
are accepted: an owner whose PDLIs failed keeps its previous entry and is read again, so the
diff is sent again. A lost connection drops the watch and what happened meanwhile: the
follower stops publishing at once (fencing), and after reconnecting (and finding itself
still the leader) reads everything again and diffs it against the index.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import structlog

from services.core.config import OffloadDefaults
from services.core.signing import IntentSigner
from services.marker.follower.checkpoint import CheckpointStore, CheckpointUnreadable
from services.marker.follower.diff import Unlinked, carried, stale, unlinked
from services.marker.follower.index import OwnerIndex, encode
from services.marker.follower.leadership import Leadership
from services.marker.follower.metrics import FollowerMetrics
from services.marker.follower.owner_paths import ROOTS, OwnerPath, classify
from services.marker.follower.reading import FullRead, is_owner_data, read_everything
from services.marker.metrics import tier_label
from services.marker.own_writes import DELETED, OwnWrites
from services.marker.owners import LedgerRef, Owner
from services.marker.planning import MarkRequest, Stamp, own_fields, shared_fields
from services.metadata import (
    CorruptMetadata,
    MetadataError,
    MetadataStore,
    VersionConflict,
    WatchEvent,
)
from services.systopic import IntentEncoder, IntentPublisher, OutgoingMessage
from services.systopic.subscription_watch import SubscriptionWatch
from tombstone.v1 import pending_delete_pb2 as _pd

_log = structlog.get_logger(__name__)

BATCH = 1024
"""Changed znodes read (and their PDLIs published) per round."""
RETRY_DELAY = 1.0
"""Pause before trying again after a store or publish failure."""
STOP_TIMEOUT = 10.0
"""Longest a stop waits for the last checkpoint."""


@dataclass(frozen=True)
class FollowerSettings:
    marker_id: str
    cluster: str = ""
    delivery_delay: timedelta = timedelta(seconds=5)
    offload_defaults: OffloadDefaults = field(default_factory=OffloadDefaults)
    offload_tier: bool = True
    checkpoint_interval: timedelta = timedelta(seconds=60)


@dataclass
class _Change:
    path: str
    owner: OwnerPath
    entry: array[int] | None
    gone: Unlinked
    written_ms: int
    messages: list[OutgoingMessage] = field(default_factory=list)
    tiers: list[int] = field(default_factory=list)


class Follower:
    def __init__(
        self,
        *,
        store: MetadataStore,
        publisher: IntentPublisher,
        settings: FollowerSettings,
        metrics: FollowerMetrics | None = None,
        signer: IntentSigner | None = None,
        own_writes: OwnWrites | None = None,
        gate: SubscriptionWatch | None = None,
    ) -> None:
        self._store = store
        self._gate = gate
        """While it says the deleters' subscription is missing, changes are held: nothing is
        published (it would not be kept) and the index does not move, so they are read and
        diffed again once it is back."""
        self._publisher = publisher
        self._settings = settings
        self._metrics = metrics or FollowerMetrics()
        self._signer = signer
        self._own_writes = own_writes
        """The marker's own unlinks: their intents are on the topic already."""
        self._leadership = Leadership(store, settings.marker_id)
        self._checkpoints = CheckpointStore(store)
        self.index = OwnerIndex()
        self._based = False
        self._led_session: int | None = None
        """The index holds a full read (or the checkpoint it was diffed against)."""
        self._dirty: dict[str, int] = {}
        """Changed owner paths to read, with when the first event arrived (ms)."""
        self._wake = asyncio.Event()
        self._active = False
        self._changed_since_checkpoint = False
        self._checkpoint_ms: int | None = None
        self.idle = asyncio.Event()
        """Set whenever the follower has nothing left to read (tests and benchmarks)."""

    @property
    def active(self) -> bool:
        return self._active

    async def run(self, stopping: asyncio.Event) -> None:
        """Follow until `stopping` is set (or the task is cancelled); every failure is
        retried, none ends the loop. On the way out, a leader writes a last checkpoint and
        gives the leadership up, so a restart or a standby misses nothing."""
        try:
            while not stopping.is_set():
                try:
                    if not await self._leadership.acquire(stopping):
                        break
                    await self._lead(stopping)
                except (MetadataError, CheckpointUnreadable) as e:
                    _log.warning("follower_retrying", error=str(e))
                    await _sleep(RETRY_DELAY, stopping)
                finally:
                    self._set_active(False)
        finally:
            await self._leave()

    async def _leave(self) -> None:
        """The last checkpoint and the release, shielded: the service cancels its background
        tasks right after asking them to stop, and the cancel must not cut the write short."""
        _log.info("follower_stopping", connected=self._store.connected, owners=len(self.index))
        work = asyncio.ensure_future(self._last_checkpoint())
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            with contextlib.suppress(asyncio.CancelledError):
                await work
            raise

    async def _last_checkpoint(self) -> None:
        try:
            async with asyncio.timeout(STOP_TIMEOUT):
                if self._store.connected and await self._leadership.holds():
                    await self._checkpoint(final=True)  # still the leader: the write is ours
                    await self._leadership.release()
        except (MetadataError, TimeoutError) as e:
            _log.warning("follower_last_checkpoint_failed", error=str(e))

    async def _lead(self, stopping: asyncio.Event) -> None:
        lost = self._store.connection_lost()
        # Fenced the moment the connection drops, even in the middle of a round.
        lost.add_done_callback(lambda _lost: self._set_active(False))
        try:
            self._dirty.clear()
            for root in ROOTS:
                await self._store.add_recursive_watch(root, self._on_event)
            self._set_active(True)
            await self._full_read()
            await self._follow(lost, stopping)
        finally:
            lost.cancel()

    def _set_active(self, active: bool) -> None:
        self._active = active
        self._metrics.active.set(1 if active else 0)

    def _on_event(self, kind: WatchEvent, path: str) -> None:
        if classify(path) is None:
            return
        self._dirty.setdefault(path, _now_ms())
        self.idle.clear()
        self._wake.set()

    async def _full_read(self) -> None:
        """Read every owner and diff it against the index. After a reconnect of the same
        session the index is this follower's own; after a new session (a restart, an expiry,
        a takeover from another follower) a checkpoint newer than the index is diffed
        against instead; with neither, the read only becomes the index."""
        session = self._store.session_id
        reason = "reconnect"
        if not (self._based and session == self._led_session):
            loaded = await self._checkpoints.load()
            if loaded is not None:
                self.index, reason = loaded, "checkpoint"
                self._checkpoint_ms = _now_ms()
            elif not self._based:
                reason = "start"
        self._led_session = session
        fresh = await read_everything(self._store, self.index.drivers)
        self._metrics.full_reads.labels(reason).inc()
        if reason == "start":
            # Nothing to diff against: what was unlinked before now is the reconciler's.
            self.index.replace(fresh.entries)
            _log.info("follower_indexed", owners=len(fresh.entries), znodes=fresh.znodes)
        else:
            await self._apply_full(fresh, replay=reason == "checkpoint")
        self._based = True
        self._changed_since_checkpoint = True
        self._update_gauges()

    async def _apply_full(self, fresh: FullRead, *, replay: bool) -> None:
        """Diff every owner: those in the index (absent now: deleted) and the new ones."""
        now = _now_ms()
        changes: list[_Change] = []
        for path in list(self.index.entries) + [
            p for p in fresh.entries if p not in self.index.entries
        ]:
            if path in fresh.unreadable:
                continue
            owner = classify(path)
            if owner is None:
                continue
            self._diff_into(changes, path, owner, fresh.entries.get(path), now)
        failed = await self._publish(changes, replay=replay)
        for path in failed:
            self._dirty.setdefault(path, now)
        _log.info(
            "follower_rediffed",
            owners=len(fresh.entries),
            changed=len(changes),
            replay=replay,
            failed=len(failed),
        )

    def _diff_into(
        self,
        changes: list[_Change],
        path: str,
        owner: OwnerPath,
        entry: array[int] | None,
        written_ms: int,
    ) -> None:
        old = self.index.get(path)
        if (old is None and entry is None) or stale(old, entry):
            return
        entry = carried(old, entry)
        changes.append(
            _Change(path, owner, entry, unlinked(old, entry, self.index.drivers), written_ms)
        )

    async def _follow(self, lost: asyncio.Future[None], stopping: asyncio.Event) -> None:
        interval = self._settings.checkpoint_interval.total_seconds()
        next_checkpoint = time.monotonic() + interval
        stop = asyncio.ensure_future(stopping.wait())
        try:
            while not lost.done() and not stopping.is_set():
                held = self._held()
                if not self._dirty or held:
                    if not self._dirty:
                        self.idle.set()
                    if held:
                        self._update_gauges()
                    self._wake.clear()
                    wake = asyncio.ensure_future(self._wake.wait())
                    timeout = max(0.0, next_checkpoint - time.monotonic())
                    waiting: list[asyncio.Future[Any]] = [wake, lost, stop]
                    if held and self._gate is not None:
                        waiting.append(asyncio.ensure_future(self._gate.wait_ready()))
                    await asyncio.wait(
                        waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                    )
                    for future in (wake, *waiting[3:]):
                        future.cancel()
                if lost.done() or stopping.is_set():
                    break
                if self._dirty and not self._held():
                    await self._round()
                if time.monotonic() >= next_checkpoint:
                    if not await self._try_checkpoint():
                        return
                    next_checkpoint = time.monotonic() + interval
        finally:
            stop.cancel()
        if lost.done():
            self._set_active(False)  # fenced: nothing is published until leadership is proved
            _log.warning("follower_connection_lost", owners=len(self.index))

    async def _round(self) -> None:
        paths = list(self._dirty)[:BATCH]
        arrived = {path: self._dirty.pop(path) for path in paths}
        results = await self._store.get_many(paths)
        changes: list[_Change] = []
        retry: list[str] = []
        for path, result in zip(paths, results, strict=True):
            if isinstance(result, MetadataError):
                retry.append(path)
                continue
            owner = classify(path)
            if owner is None:
                continue
            self._metrics.changes.inc()
            entry = None
            written = arrived[path]
            if result is not None and not is_owner_data(owner.kind, result):
                continue
            if result is not None:
                try:
                    entry = encode(owner.kind, result, path, self.index.drivers)
                except CorruptMetadata as e:
                    self._metrics.unreadable.inc()
                    _log.warning("follower_unreadable_owner", path=path, error=e.problem)
                    continue
                written = result.mtime_ms
            self._diff_into(changes, path, owner, entry, written)
        retry += await self._publish(changes, replay=False)
        for path in retry:
            self._dirty.setdefault(path, arrived[path])
        if retry:
            await asyncio.sleep(RETRY_DELAY)
        self._update_gauges()

    async def _publish(self, changes: Sequence[_Change], *, replay: bool) -> list[str]:
        """Publish every change's PDLIs; apply the changes whose PDLIs were all accepted to
        the index. Returns the paths of the others (to read again)."""
        outgoing: list[OutgoingMessage] = []
        for change in changes:
            self._encode(change, replay=replay)
            outgoing.extend(change.messages)
        if outgoing and not self._active:
            return [change.path for change in changes]  # fenced: publish nothing
        if outgoing and self._held():
            return [change.path for change in changes]  # kept for when the gate opens
        try:
            results = await self._publisher.publish(outgoing) if outgoing else []
        except Exception as e:  # the port: an exception means nothing was accepted
            _log.warning("follower_publish_failed", error=repr(e), messages=len(outgoing))
            self._metrics.publish_failures.inc(len(changes))
            return [change.path for change in changes]
        failed: list[str] = []
        at = 0
        now = _now_ms()
        for change in changes:
            mine = results[at : at + len(change.messages)]
            at += len(change.messages)
            if any(not result.ok for result in mine):
                self._metrics.publish_failures.inc()
                failed.append(change.path)
                continue
            for tier in change.tiers:
                self._metrics.pdlis.labels(tier_label(tier)).inc()
            if change.messages:
                self._metrics.lag.observe(max(0, now - change.written_ms) / 1000)
            self.index.put(change.path, change.entry)
            self._changed_since_checkpoint = True
        return failed

    def _encode(self, change: _Change, *, replay: bool) -> None:
        for owner, refs, seen in _owned(change):
            change.messages.extend(self._encode_owned(change, owner, refs, seen, replay=replay))

    def _encode_owned(
        self,
        change: _Change,
        owner: Owner,
        refs: Sequence[LedgerRef],
        seen_ms: int,
        *,
        replay: bool,
    ) -> list[OutgoingMessage]:
        owns: list[_pd.PendingDeleteLedgerInfo] = []
        for ref in refs:
            for tier in ref.tiers:
                if tier == _pd.OFFLOAD_LEDGER and not self._settings.offload_tier:
                    _log.warning(
                        "follower_offload_tier_off", path=change.path, ledger_id=ref.ledger_id
                    )
                    continue
                if self._marked_by_us(change, ref.ledger_id, tier):
                    self._metrics.duplicates.labels("marker").inc()
                    continue
                if replay:
                    self._metrics.duplicates.labels("replay").inc()
                owns.append(own_fields(ref, tier, self._settings.offload_defaults))
                change.tiers.append(tier)
        if not owns:
            return []
        request = MarkRequest(
            owner=owner,
            ledger_ids=(),
            source=_pd.OBSERVED,
            request_id=f"observed:{change.path}@{change.gone.token}",
        )
        now = _now_ms()
        delay = int(self._settings.delivery_delay.total_seconds() * 1000)
        stamp = Stamp(
            fence_token=change.gone.token,
            marked_at_ms=now,
            not_before_ms=now + delay,
            marker_id=self._settings.marker_id,
            cluster=self._settings.cluster,
            # However late this is recorded, the ledgers were listed at `seen_ms` (the store's
            # clock): the verifier refuses a ledger created under their ids after it.
            seen_at_ms=seen_ms,
        )
        encoder = IntentEncoder(shared_fields(request, stamp), self._signer)
        return encoder.encode_many(owns)

    def _marked_by_us(self, change: _Change, ledger_id: int, tier: int) -> bool:
        own = self._own_writes
        if own is None:
            return False
        version = change.gone.token if change.entry is not None else DELETED
        return own.wrote(change.path, version, ledger_id, tier)

    async def _try_checkpoint(self) -> bool:
        """Checkpoint; False when another follower wrote one since (this one then re-proves
        its leadership and re-reads against the newer checkpoint)."""
        try:
            await self._checkpoint()
        except VersionConflict:
            _log.warning("follower_checkpoint_conflict")
            self._led_session = None
            return False
        except MetadataError as e:
            _log.warning("follower_checkpoint_failed", error=str(e))  # retried next interval
        return True

    async def _checkpoint(self, *, final: bool = False) -> None:
        if not self._changed_since_checkpoint or not self._based or not (self._active or final):
            self._update_gauges()
            return
        pointer = await self._checkpoints.save(self.index)
        self._changed_since_checkpoint = False
        self._checkpoint_ms = pointer.written_ms
        _log.info("follower_checkpoint", owners=pointer.owners, bytes=pointer.size)
        self._update_gauges()

    def _held(self) -> bool:
        return self._gate is not None and not self._gate.ready

    def _update_gauges(self) -> None:
        self._metrics.held.set(len(self._dirty) if self._held() else 0)
        self._metrics.index_owners.set(len(self.index))
        self._metrics.index_references.set(self.index.ledger_count())
        if self._checkpoint_ms is not None:
            self._metrics.checkpoint_age.set((_now_ms() - self._checkpoint_ms) / 1000)


def _owned(change: _Change) -> list[tuple[Owner, Sequence[LedgerRef], int]]:
    """The ledgers a change unlinked, by the owner their PDLIs name (the znode's own kind,
    and for a cursor also COMPACTED_LEDGER and DELAYED_INDEX_BUCKET: same znode, same fence
    token; the PDLI's component says which property held the reference), each group with
    its `seen_at_ms` (0 where the diff knows no time they were listed: `diff.Unlinked`)."""
    owner, gone = change.owner.owner, change.gone
    out: list[tuple[Owner, Sequence[LedgerRef], int]] = [(owner, gone.refs, gone.seen_ms)]
    if gone.unseen:
        out.append((owner, gone.unseen, 0))
    for component, ids, seen in (
        (_pd.COMPACTED_LEDGER, gone.compacted, 0),
        (_pd.DELAYED_INDEX_BUCKET, gone.buckets, gone.seen_ms),
    ):
        if ids:
            out.append((replace(owner, component=component), [LedgerRef(i) for i in ids], seen))
    return out


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def _sleep(seconds: float, stopping: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)
