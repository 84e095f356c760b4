"""Phase 1 of the protocol (docs/design.md §2): record intents, then unlink in one compare-and-set.

    read owner (version v) → classify ledgers → one PDLI per (ledger, tier), fence token v+1
    → publish all, await every receipt → unlink exactly the fully accepted ledgers with one
    CAS at v (marker-writes) or leave the write to the caller (caller-writes).

S3 (intent before unlink) holds because the write names only ledgers whose every PDLI has
a receipt. Calls for one owner are serialised; calls for different owners run concurrently.
This module has no gRPC or client-library imports: it talks to ports.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import structlog

from services.core.config import OffloadDefaults
from services.core.errors import Conflict, FailedPrecondition, NotFound, Unavailable
from services.core.signing import IntentSigner
from services.marker._locks import KeyedLocks
from services.marker.journal import IntentKey, ReceiptJournal, now_ms
from services.marker.metrics import MarkerMetrics, tier_label
from services.marker.neighbours import Neighbours
from services.marker.own_writes import OwnWrites
from services.marker.owners import EncodingOptions, OwnerSnapshot, parse_snapshot
from services.marker.planning import (
    MarkRequest,
    NotMarked,
    Plan,
    Stamp,
    fence_token,
    own_fields,
    plan_marking,
    shared_fields,
)
from services.marker.ports import Believer, OwnerStore
from services.systopic import (
    IntentEncoder,
    IntentPublisher,
    OutgoingMessage,
    decode_intent,
    encode_intents,
)
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class MarkingSettings:
    marker_id: str
    """Stable name of this marker instance (also the producer name)."""
    cluster: str = ""
    """Pulsar cluster name written into every PDLI."""
    delivery_delay: timedelta = timedelta(seconds=5)
    """PDLIs carry `not_before = marked_at + delay`: the deleter waits for the write to land."""
    retry_window: timedelta = timedelta(seconds=60)
    """How long the deleter keeps retrying a PDLI whose marking is in progress."""
    encoding: EncodingOptions = field(default_factory=EncodingOptions)
    pause_after_send: timedelta | None = None
    """Test only: sleep between the last receipt and the write (crash-point tests)."""
    offload_defaults: OffloadDefaults = field(default_factory=OffloadDefaults)
    """The operator's offloader, filled into the PDLIs of contexts written by Pulsar 2.1."""
    offload_tier: bool = True
    """Send OFFLOAD_LEDGER intents; off refuses to mark offloaded ledgers."""


@dataclass
class MarkResult:
    marked: list[tuple[int, tuple[_pd.LedgerType.ValueType, ...]]]
    not_marked: list[NotMarked]
    read_version: int
    new_version: int
    fence_token: int
    written: bool
    pdlis_sent: int
    request_id: str


class _Sent:
    """Per ledger: its PDLI messages, the tiers accepted, and the oldest acceptance time.

    A plain class with slots: one is built per ledger on the hot path."""

    __slots__ = ("accepted", "accepted_at_ms", "error", "messages", "tiers")

    def __init__(self, accepted_at_ms: int) -> None:
        self.accepted_at_ms = accepted_at_ms
        self.messages: list[OutgoingMessage] = []
        self.tiers: list[_pd.LedgerType.ValueType] = []
        self.accepted: list[_pd.LedgerType.ValueType] = []
        self.error: str | None = None


def _hold_blocked(result: MarkResult, snapshot: OwnerSnapshot) -> None:
    """Keep linked what may only leave together with ledgers whose PDLIs were not all
    accepted: the latest schema version when the send of another version failed. The plan
    checked the ledgers as asked; a failed send shrinks the set, and the latest version
    unlinked without the others would leave a locator whose `info` names a ledger its `index`
    no longer lists, which Pulsar's next `putSchema` (a new `info`, the old `index` plus it)
    drops with no intent left (its intent, already on the topic, was found still referenced
    and acknowledged). The held ledger's intent is on the topic: the verifier finds it still
    referenced, and a later call marks it again."""
    held = snapshot.blocked([i for i, _ in result.marked])
    if held:
        result.marked = [m for m in result.marked if m[0] not in held]
        result.not_marked += [NotMarked(i, _mk.CANNOT_UNLINK, why) for i, why in held.items()]


class Marker:
    def __init__(
        self,
        *,
        store: OwnerStore,
        publisher: IntentPublisher,
        journal: ReceiptJournal,
        settings: MarkingSettings,
        believer: Believer | None = None,
        metrics: MarkerMetrics | None = None,
        signer: IntentSigner | None = None,
        own_writes: OwnWrites | None = None,
        neighbours: Neighbours | None = None,
    ) -> None:
        self._store = store
        self._neighbours = neighbours or Neighbours({})
        self.own_writes = own_writes or OwnWrites()
        """The unlinks this marker wrote (the follower does not send their intents again)."""
        self._signer = signer
        """Signs every PDLI this marker sends (the encoders apply it: `systopic.messages`)."""
        self._publisher = publisher
        self._journal = journal
        self._settings = settings
        self._believer = believer
        self._metrics = metrics or MarkerMetrics()
        self._locks = KeyedLocks()
        tiers = (_pd.LEDGER, _pd.OFFLOAD_LEDGER)
        self._sent_by_tier = {t: self._metrics.pdlis_sent.labels(tier_label(t)) for t in tiers}
        self._failed_by_tier = {t: self._metrics.send_failures.labels(tier_label(t)) for t in tiers}
        self._reused_by_tier = {t: self._metrics.pdlis_reused.labels(tier_label(t)) for t in tiers}

    async def mark(self, request: MarkRequest) -> MarkResult:
        """Mark `request.ledger_ids`; raises `Conflict`, `NotFound`, `Unavailable`..."""
        started = time.perf_counter()
        outcome = "error"
        try:
            async with self._locks.hold(request.owner.path):
                result = await self._mark_locked(request)
            outcome = "ok" if not result.not_marked else "partial"
            return result
        except Conflict:
            self._metrics.conflicts.inc()
            outcome = "conflict"
            raise
        except NotFound:
            outcome = "not_found"
            raise
        except Unavailable:
            outcome = "unavailable"
            raise
        finally:
            self._metrics.mark_calls.labels(outcome).inc()
            self._metrics.mark_latency.observe(time.perf_counter() - started)

    async def _mark_locked(self, request: MarkRequest) -> MarkResult:
        snapshot, version = await self._read(request)
        plan = plan_marking(request, snapshot, version, offload_tier=self._settings.offload_tier)
        if request.reconciler and self._neighbours:
            await self._neighbours.restrict(request, plan, owner_here=snapshot is not None)
        token = fence_token(request, version)
        sent, handle = await self._send(request, plan, version, token)
        if not request.reconciler:
            # Before the write: the follower may read the owner before this call resumes.
            accepted = [(i, tier) for i, entry in sent.items() for tier in entry.accepted]
            deletes = request.owner.component == _pd.SCHEMA_STORAGE
            self.own_writes.record(request.owner.path, token, accepted, may_delete=deletes)
        unlinked = False
        try:
            result = self._result(request, plan, sent, version, token)
            if snapshot is not None and not request.reconciler:
                _hold_blocked(result, snapshot)
            fully = [i for i, _ in result.marked]
            if fully and not request.caller_writes and not request.reconciler:
                await self._pause_after_send(request, fully)
                assert snapshot is not None
                result.new_version = await self._unlink(request, snapshot, version, fully)
                result.written = unlinked = True

                await self._after_write(request, fully, sent)
            return result
        finally:
            self._journal.settle(handle, unlinked=unlinked)

    def _result(
        self, request: MarkRequest, plan: Plan, sent: dict[int, _Sent], version: int, token: int
    ) -> MarkResult:
        failed = [NotMarked(i, _mk.SEND_FAILED, s.error) for i, s in sent.items() if s.error]
        return MarkResult(
            marked=[(i, tuple(s.accepted)) for i, s in sent.items() if s.error is None],
            not_marked=plan.refused + failed,
            read_version=version,
            new_version=version,
            fence_token=token,
            written=False,
            pdlis_sent=sum(len(s.accepted) for s in sent.values()),
            request_id=request.request_id,
        )

    async def _read(self, request: MarkRequest) -> tuple[OwnerSnapshot | None, int]:
        owner = request.owner
        try:
            node = await self._store.get(owner.path)
        except NotFound:
            if not request.reconciler:
                raise
            snapshot, version = None, -1
        else:
            version = node.version
            snapshot = parse_snapshot(owner, node.data, self._settings.encoding)
            refusal = snapshot.marker_write_refusal()
            if refusal is not None and not request.caller_writes and not request.reconciler:
                raise FailedPrecondition(f"{owner.path}: {refusal}")
        expected = request.expected_version
        if expected is not None and expected != version:
            raise Conflict(
                f"{owner.path}: version is {version}, the caller expected {expected}; "
                "nothing was sent or unlinked"
            )
        return snapshot, version

    async def _send(
        self, request: MarkRequest, plan: Plan, version: int, token: int
    ) -> tuple[dict[int, _Sent], int]:
        """Publish what the journal does not already know; returns the per-ledger outcome and
        the journal handle of the receipts (already in its file, settled by the caller)."""
        now = now_ms()
        encoder = IntentEncoder(
            shared_fields(request, self._stamp(request, token, now)), self._signer
        )
        path = request.owner.path
        # Reconciler PDLIs unlink nothing and never reuse receipts: two scans may name two
        # uploads of one ledger at one owner version, which the journal cannot tell apart.
        journal_knows = not request.reconciler and self._journal.knows(path, version)
        sent: dict[int, _Sent] = {}
        outgoing: list[tuple[_Sent, int, _pd.LedgerType.ValueType, OutgoingMessage]] = []
        # Encoded (and signed) together: one signature covers a batch of them.
        messages = iter(
            encoder.encode_many(
                [
                    own_fields(ref, tier, self._settings.offload_defaults)
                    for ref in plan.refs
                    for tier in ref.tiers
                ]
            )
        )
        for ref in plan.refs:
            entry = sent[ref.ledger_id] = _Sent(now)
            for tier in ref.tiers:
                message = next(messages)
                entry.messages.append(message)
                entry.tiers.append(tier)
                earlier = None
                if journal_knows:
                    earlier = self._journal.accepted_at(
                        IntentKey(path, version, ref.ledger_id, tier)
                    )
                if earlier is None:
                    outgoing.append((entry, ref.ledger_id, tier, message))
                else:
                    entry.accepted.append(tier)
                    entry.accepted_at_ms = min(entry.accepted_at_ms, earlier)
                    self._reused_by_tier[tier].inc()
        accepted = await self._publish(outgoing)
        receipts = [] if request.reconciler else accepted
        return sent, self._journal.append(path, version, receipts, now_ms())

    def _stamp(self, request: MarkRequest, token: int, now: int) -> Stamp:
        return Stamp(
            fence_token=token,
            marked_at_ms=now,
            not_before_ms=now + int(self._settings.delivery_delay.total_seconds() * 1000),
            marker_id=self._settings.marker_id,
            cluster=self._settings.cluster,
            seen_at_ms=request.seen_at_ms,
        )

    async def _publish(
        self, outgoing: Sequence[tuple[_Sent, int, _pd.LedgerType.ValueType, OutgoingMessage]]
    ) -> list[tuple[int, int]]:
        """Send; record each outcome on its ledger; return the accepted (ledger, tier)s."""
        if not outgoing:
            return []
        results = await self._publisher.publish([message for *_, message in outgoing])
        accepted: list[tuple[int, int]] = []
        failed: Counter[_pd.LedgerType.ValueType] = Counter()
        for (entry, ledger_id, tier, _), result in zip(outgoing, results, strict=True):
            if result.error is None:
                entry.accepted.append(tier)
                accepted.append((ledger_id, tier))
            else:
                entry.error = f"{tier_label(tier)} PDLI not accepted: {result.error}"
                failed[tier] += 1
        for sent_tier, count in Counter(tier for _, tier in accepted).items():
            self._sent_by_tier[_pd.LedgerType.ValueType(sent_tier)].inc(count)
        for failed_tier, count in failed.items():
            self._failed_by_tier[failed_tier].inc(count)
        return accepted

    async def _pause_after_send(self, request: MarkRequest, fully: list[int]) -> None:
        pause = self._settings.pause_after_send
        if pause is not None:
            _log.warning("test_pause_after_send", owner=request.owner.path, ledgers=len(fully))
            await asyncio.sleep(pause.total_seconds())

    async def _unlink(
        self,
        request: MarkRequest,
        snapshot: OwnerSnapshot,
        version: int,
        fully: list[int],
    ) -> int:
        path = request.owner.path
        unlink = snapshot.without(fully, new_cursor_ledger_id=request.new_cursor_ledger_id)
        on_topic = f"PDLIs for ledgers {_ids(fully)} are on the system topic"
        try:
            if unlink.data is None:
                await self._store.delete(path, version=version)
                new_version = -1
            else:
                new_version = await self._store.set(path, unlink.data, version=version)
        except (Conflict, NotFound) as exc:
            raise Conflict(f"{exc}; {on_topic}; nothing was unlinked") from exc
        except Unavailable as exc:
            raise Unavailable(
                f"{exc}; {on_topic}; the write at version {version} may or may not have "
                "landed: re-read the owner"
            ) from exc
        self._metrics.ledgers_unlinked.inc(len(fully))
        return new_version

    async def _after_write(
        self, request: MarkRequest, fully: list[int], sent: dict[int, _Sent]
    ) -> None:
        window_ms = int(self._settings.retry_window.total_seconds() * 1000)
        horizon = now_ms() - window_ms  # accepted at or before this: the write came late
        late = [i for i in fully if sent[i].accepted_at_ms <= horizon]
        if late:
            await self._resend_late(request, late, sent)
        if self._believer is not None:
            self._believer.submit([m.payload for i in fully for m in sent[i].messages])

    async def _resend_late(
        self, request: MarkRequest, late: list[int], sent: dict[int, _Sent]
    ) -> None:
        """The write landed after the deleter may have given up on the first PDLIs: send
        fresh ones. The unlink already happened, so a failure here is logged, not raised:
        the first PDLIs are then in the dead-letter topic with "marking in progress"."""
        fresh = []
        now = now_ms()
        delay = int(self._settings.delivery_delay.total_seconds() * 1000)
        for ledger_id in late:
            for message in sent[ledger_id].messages:
                copy = decode_intent(message.payload)
                copy.marked_at_ms, copy.not_before_ms = now, now + delay
                copy.ClearField("signing_key_id")
                copy.ClearField("signature")  # marked_at_ms changed: signed afresh below
                fresh.append(copy)
        try:
            results = await self._publisher.publish(encode_intents(fresh, self._signer))
        except Exception:
            _log.exception("late_resend_failed", owner=request.owner.path, ledgers=late)
            return
        failed = sum(1 for r in results if not r.ok)
        self._metrics.late_resends.inc(len(fresh) - failed)
        _log.warning("late_write_resent", owner=request.owner.path, ledgers=late, failed=failed)


def _ids(ledger_ids: Sequence[int], limit: int = 20) -> str:
    shown = ", ".join(str(i) for i in ledger_ids[:limit])
    more = len(ledger_ids) - limit
    return f"[{shown}{f', … {more} more' if more > 0 else ''}]"
