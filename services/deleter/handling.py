"""What happens to one message: decide (decode, wait until due, verify, delete), then settle.

`decide` never acknowledges anything; it returns a `Settlement`. `settle` carries it out with
exactly one of: acknowledge; publish to the retry topic then acknowledge; publish to the
dead-letter topic then acknowledge; release for redelivery (when a publish fails). No branch
both retries and acknowledges without the retry being stored first, and none does nothing.

Two waits come before a settlement, both holding the message (never settling it): an outage
of the verifier, ZooKeeper or S3 (`outage.py`: the message is decided again once the
dependency is back, spending no retry), and the pace of forged dead letters (`forged.py`).
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

import structlog

from services.core.enums import enum_name
from services.core.errors import CorruptData, TombstoneError
from services.core.logging import audit
from services.deleter.forged import ForgedLimiter
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import Dependency, OutageGate, verdict_outage
from services.deleter.ports import (
    BookKeeperDeleter,
    DeleteFailed,
    DeleteResult,
    OffloadDeleter,
    Tier,
    VerdictSource,
    VerifierUnreachable,
)
from services.systopic.consumer import IncomingMessage, MessageSource
from services.systopic.dead_letter import ReasonCode, dead_letter_message
from services.systopic.messages import decode_intent, owner_label
from services.systopic.ports import IntentPublisher, OutgoingMessage
from services.systopic.retry import RetryPolicy, retry_count, retry_message
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf

_log = structlog.get_logger(__name__)
_B = TypeVar("_B")

# SKIP verdicts that settle nothing. Only IN_USE (still referenced after the fence) and
# NOT_FOUND (proved gone under a confirmed root, layout or bucket) are acknowledged; the rest
# would leave an artifact behind unseen, so they go to the dead-letter topic with their reason.
_UNSETTLED_SKIPS: dict[_vf.SkipReason.ValueType, ReasonCode] = {
    _vf.INVALID: ReasonCode.INVALID,
    _vf.MISMATCH: ReasonCode.MISMATCH,
    _vf.FORGED: ReasonCode.FORGED,
    _vf.UNSUPPORTED: ReasonCode.UNSUPPORTED,
    _vf.FOREIGN: ReasonCode.FOREIGN,
    _vf.SKIP_REASON_UNSPECIFIED: ReasonCode.UNKNOWN,
}
# The only SKIPs that settle a PDLI: still referenced after the fence, or proved gone.
_SETTLED_SKIPS = frozenset({_vf.IN_USE, _vf.NOT_FOUND})
# The dependency whose outage a transient delete failure of a tier is.
_TIER_DEPENDENCY = {Tier.BOOKKEEPER: Dependency.ZOOKEEPER, Tier.S3: Dependency.S3}


class Action(enum.Enum):
    ACK = "ack"
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"
    RELEASE = "release"


class Phase(enum.Enum):
    """Where a message is; a drain cancels HOLDING at once and lets the others finish."""

    HOLDING = "holding"
    WORKING = "working"
    SETTLING = "settling"


@dataclass(frozen=True)
class Settlement:
    action: Action
    reason: str = ""
    reason_code: ReasonCode | None = None
    pdli: _pd.PendingDeleteLedgerInfo | None = None
    attempt: int = 0
    """Retries the message already had."""
    outage: Dependency | None = None
    """For a RETRY: the dependency that did not answer (the message waits instead, if it can)."""
    deleted: DeleteResult | None = None
    """In a preview, for a DELETE verdict: what a delete would have removed."""
    verdict: _vf.VerifyResponse | None = None
    """In a preview, the verdict behind `deleted`."""


@dataclass(frozen=True)
class Backends:
    """The delete backends; a tier without one dead-letters its PDLIs with a clear reason."""

    bookkeeper: BookKeeperDeleter | None = None
    s3: OffloadDeleter | None = None
    filesystem: OffloadDeleter | None = None


class Settler(Protocol):
    """Settles in a deleter's stead (a preview's, `services/deleter/preview.py`)."""

    async def settle(self, source: MessageSource, message: IncomingMessage, s: Settlement) -> bool:
        """True when `message` was acknowledged, False when it comes again."""
        ...


@dataclass
class Tracker:
    """One message in flight, seen by the pool (drain, status)."""

    message: IncomingMessage
    received_at: float
    phase: Phase = Phase.WORKING


class Handler:
    def __init__(
        self,
        *,
        verdicts: VerdictSource,
        backends: Backends,
        retry_sink: IntentPublisher,
        dead_letter_sink: IntentPublisher,
        policy: RetryPolicy,
        max_hold: timedelta,
        metrics: DeleterMetrics,
        outage: OutageGate | None = None,
        forged: ForgedLimiter | None = None,
        clock: Callable[[], float] = time.time,
        preview: Settler | None = None,
    ) -> None:
        """Without `outage`, an outage is an ordinary RETRY; without `forged`, forged PDLIs are
        dead-lettered at once. With `preview`, a DELETE is not recorded as done (the backends
        are the preview's, which delete nothing) and `preview` settles every message: the
        sinks are never used."""
        self._verdicts = verdicts
        self._backends = backends
        self._retry_sink = retry_sink
        self._dead_letter_sink = dead_letter_sink
        self._policy = policy
        self._max_hold = max_hold.total_seconds()
        self._metrics = metrics
        self._outage = outage
        self._forged = forged
        self._clock = clock
        self._preview = preview

    # --- decide ----------------------------------------------------------------------------

    async def decide(self, tracker: Tracker) -> Settlement:
        message = tracker.message
        try:
            pdli = decode_intent(message.payload, message.properties)
            attempt = retry_count(message.properties)
        except CorruptData as exc:
            return Settlement(Action.DEAD_LETTER, str(exc), ReasonCode.UNDECODABLE)
        if not pdli.HasField("ledger_id"):
            # Nothing to verify, delete or retry: a copy could not even be routed.
            return Settlement(Action.DEAD_LETTER, "PDLI without ledger_id", ReasonCode.UNDECODABLE)
        await self._hold(tracker, pdli)
        waits = 0
        while True:
            await self._pass_gate(tracker)
            started = self._outage.now() if self._outage is not None else 0.0
            settlement = await self._decide_once(message, pdli, attempt)
            dependency = settlement.outage
            if dependency is None or self._outage is None:
                break
            if waits >= self._outage.settings.max_waits:
                break  # the dependency answers the deleter's probe, not this PDLI: a RETRY
            waits += 1
            self._metrics.outage_waits.labels(dependency.value).inc()
            self._outage.report(dependency, settlement.reason, since=started)
        if settlement.reason_code is ReasonCode.FORGED:
            await self._pace_forged(tracker, pdli)
        return settlement

    async def _pass_gate(self, tracker: Tracker) -> None:
        """Wait, held, while a dependency is out."""
        if self._outage is not None and self._outage.paused:
            tracker.phase = Phase.HOLDING
            await self._outage.wait_open()
        tracker.phase = Phase.WORKING

    async def _decide_once(
        self, message: IncomingMessage, pdli: _pd.PendingDeleteLedgerInfo, attempt: int
    ) -> Settlement:
        try:
            verdict = await self._verdicts.verify(pdli)
        except VerifierUnreachable as exc:
            # No answer from the verifier (down, unreachable, timed out): an outage.
            return Settlement(
                Action.RETRY,
                f"verifier: {exc}",
                pdli=pdli,
                attempt=attempt,
                outage=Dependency.VERIFIER,
            )
        except TombstoneError as exc:
            return Settlement(Action.RETRY, f"verifier: {exc}", pdli=pdli, attempt=attempt)
        dependency = verdict_outage(verdict)
        if dependency is not None:
            # The verifier could not read ZooKeeper or S3: nothing is known about this PDLI.
            reason = f"verifier: {verdict.reason}"
            return Settlement(Action.RETRY, reason, pdli=pdli, attempt=attempt, outage=dependency)
        return await self._act(message, pdli, verdict, attempt)

    async def _pace_forged(self, tracker: Tracker, pdli: _pd.PendingDeleteLedgerInfo) -> None:
        """Hold a forged PDLI until its source's pace allows one more dead letter: held in the
        window, never dropped (a real intent signed with a wrong key looks forged too)."""
        if self._forged is None:
            return
        tracker.phase = Phase.HOLDING
        self._metrics.forged_waiting.inc()
        try:
            await self._forged.admit(source_name(pdli))
        finally:
            self._metrics.forged_waiting.dec()
        tracker.phase = Phase.WORKING

    async def _hold(self, tracker: Tracker, pdli: _pd.PendingDeleteLedgerInfo) -> None:
        """Wait until the PDLI is due; a time further than `max_hold` away counts as that far,
        so no message (a forged one included) occupies a slot for longer."""
        wait = pdli.not_before_ms / 1000 - self._clock()
        if wait > 0:
            tracker.phase = Phase.HOLDING
            await asyncio.sleep(min(wait, self._max_hold))

    async def _act(
        self,
        message: IncomingMessage,
        pdli: _pd.PendingDeleteLedgerInfo,
        verdict: _vf.VerifyResponse,
        attempt: int,
    ) -> Settlement:
        if verdict.decision == _vf.SKIP:
            reason = _skip_name(verdict.skip_reason)
            self._metrics.skipped.labels(reason).inc()
            if verdict.skip_reason == _vf.FORGED:
                self._metrics.forged.labels(source_name(pdli)).inc()
            _log.info(
                "pdli_skipped",
                ledger_id=pdli.ledger_id,
                owner=owner_label(pdli),
                source=source_name(pdli),
                reason=reason,
                detail=verdict.reason,
            )
            if verdict.skip_reason in _SETTLED_SKIPS:
                return Settlement(Action.ACK, reason, pdli=pdli)
            # Not proof that nothing is left to delete: an operator must see it
            # (docs/design.md §2.3).
            # A reason this deleter does not know (a newer verifier's) is not settled either.
            unsettled = _UNSETTLED_SKIPS.get(verdict.skip_reason, ReasonCode.UNKNOWN)
            detail = verdict.reason or reason
            return Settlement(Action.DEAD_LETTER, f"{reason}: {detail}", unsettled, pdli, attempt)
        if verdict.decision != _vf.DELETE:
            why = verdict.reason or "verifier gave no decision"
            return Settlement(Action.RETRY, f"verifier: {why}", pdli=pdli, attempt=attempt)
        try:
            result = await self._delete(pdli, verdict)
        except DeleteFailed as exc:
            if self._preview is None:  # a preview attempted no delete
                self._metrics.failed.labels(exc.tier.value).inc()
            if exc.permanent:
                return Settlement(
                    Action.DEAD_LETTER, str(exc), ReasonCode.PERMANENT_ERROR, pdli, attempt
                )
            outage = _TIER_DEPENDENCY.get(exc.tier) if exc.outage else None
            return Settlement(Action.RETRY, str(exc), pdli=pdli, attempt=attempt, outage=outage)
        if self._preview is not None:
            return Settlement(
                Action.ACK,
                verdict.reason,
                pdli=pdli,
                attempt=attempt,
                deleted=result,
                verdict=verdict,
            )
        self._record_delete(message, pdli, verdict, result)
        return Settlement(Action.ACK)

    async def _delete(
        self, pdli: _pd.PendingDeleteLedgerInfo, verdict: _vf.VerifyResponse
    ) -> DeleteResult:
        evidence = verdict.WhichOneof("evidence")
        if pdli.ledger_type == _pd.LEDGER and evidence == "bookkeeper":
            ledgers = self._require(self._backends.bookkeeper, Tier.BOOKKEEPER)
            bk = verdict.bookkeeper
            return await self._timed(
                Tier.BOOKKEEPER,
                ledgers.delete_ledger(ledger_id=pdli.ledger_id, path=bk.path, version=bk.version),
            )
        if pdli.ledger_type == _pd.OFFLOAD_LEDGER and evidence == "offload":
            off = verdict.offload
            tier = Tier.FILESYSTEM if _is_filesystem(off) else Tier.S3
            chosen = self._backends.filesystem if tier is Tier.FILESYSTEM else self._backends.s3
            offloads = self._require(chosen, tier)
            return await self._timed(
                tier, offloads.delete_offloaded(ledger_id=pdli.ledger_id, evidence=off)
            )
        tier = Tier.BOOKKEEPER if pdli.ledger_type == _pd.LEDGER else Tier.S3
        raise DeleteFailed(
            tier,
            f"DELETE verdict with {evidence or 'no'} evidence for a "
            f"{enum_name(_pd.LedgerType.Name, pdli.ledger_type)} PDLI",
            permanent=True,
        )

    @staticmethod
    def _require(backend: _B | None, tier: Tier) -> _B:
        if backend is None:
            raise DeleteFailed(tier, f"no {tier} backend is configured", permanent=True)
        return backend

    async def _timed(self, tier: Tier, call: Awaitable[DeleteResult]) -> DeleteResult:
        started = time.perf_counter()
        result = await call
        self._metrics.delete_seconds.labels(tier.value).observe(time.perf_counter() - started)
        return result

    def _record_delete(
        self,
        message: IncomingMessage,
        pdli: _pd.PendingDeleteLedgerInfo,
        verdict: _vf.VerifyResponse,
        result: DeleteResult,
    ) -> None:
        self._metrics.deleted.labels(result.tier.value).inc()
        size = deleted_bytes(verdict) if result.removed else None
        if size is not None:
            self._metrics.bytes_deleted.labels(result.tier.value).inc(size)
        audit(
            "ledger_deleted",
            ledger_id=pdli.ledger_id,
            tier=result.tier.value,
            removed=result.removed,
            component=enum_name(_pd.LedgerComponent.Name, pdli.component),
            owner=owner_label(pdli),
            source=source_name(pdli),
            marker_id=pdli.marker_id,
            request_id=pdli.request_id,
            message_id=message.message_id,
            topic=message.topic,
            believed=verdict.believed,
            verdict_reason=verdict.reason,
            **result.evidence,
        )

    # --- settle ----------------------------------------------------------------------------

    async def settle(self, source: MessageSource, message: IncomingMessage, s: Settlement) -> bool:
        """Carry out `s` (exactly one of ack / retry+ack / dead-letter+ack / release); True
        when the message was acknowledged (the ack sent), False when it was released."""
        if self._preview is not None:
            return await self._preview.settle(source, message, s)
        if s.action is Action.RETRY and self._policy.exhausted(s.attempt + 1):
            s = Settlement(
                Action.DEAD_LETTER,
                f"after {s.attempt} retries: {s.reason}",
                ReasonCode.RETRIES_EXHAUSTED,
                s.pdli,
                s.attempt,
            )
        if s.action is Action.ACK:
            await self.acknowledge(source, message)
            return True
        if s.action is Action.RELEASE:
            await self._release(source, message, s.reason)
            return False
        try:
            copy, sink = self._copy(message, s)
        except Exception as exc:  # a copy that cannot be built must not strand the message
            _log.exception("copy_failed", message_id=message.message_id)
            await self._release(source, message, f"cannot build the copy: {exc!r}")
            return False
        forwarded = await self._forward(source, message, sink, copy)
        if forwarded:
            if s.action is Action.RETRY:
                _log.info("pdli_retried", message_id=message.message_id, reason=s.reason)
            else:
                code = (s.reason_code or ReasonCode.UNKNOWN).value
                self._metrics.dead_lettered.labels(code).inc()
                _log.warning(
                    "pdli_dead_lettered",
                    message_id=message.message_id,
                    reason_code=code,
                    reason=s.reason,
                    **_identity(s.pdli),
                )
        return forwarded

    def _copy(
        self, message: IncomingMessage, s: Settlement
    ) -> tuple[OutgoingMessage, IntentPublisher]:
        if s.action is Action.RETRY:
            return self._retry_copy(message, s), self._retry_sink
        code = s.reason_code or ReasonCode.UNKNOWN
        letter = dead_letter_message(message, reason_code=code, reason=s.reason, attempts=s.attempt)
        return letter, self._dead_letter_sink

    def _retry_copy(self, message: IncomingMessage, s: Settlement) -> OutgoingMessage:
        assert s.pdli is not None
        attempt = s.attempt + 1
        due = self._clock() + self._policy.delay(attempt).total_seconds()
        return retry_message(
            s.pdli,
            attempt=attempt,
            reason=s.reason,
            not_before_ms=int(due * 1000),
            origin_message_id=message.message_id,
        )

    async def _forward(
        self,
        source: MessageSource,
        message: IncomingMessage,
        sink: IntentPublisher,
        copy: OutgoingMessage,
    ) -> bool:
        """Store `copy`, then acknowledge the original; release it if the copy failed."""
        try:
            [result] = await sink.publish([copy])
            error = result.error
        except Exception as exc:  # an exception means not stored, whatever it was
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            await self._release(source, message, f"publish failed: {error}")
            return False
        if sink is self._retry_sink:
            self._metrics.retried.inc()
        await self.acknowledge(source, message)
        return True

    async def acknowledge(self, source: MessageSource, message: IncomingMessage) -> None:
        """Acknowledge `message`; a failure is logged (the message comes again)."""
        await acknowledge_counted(source, message, self._metrics)

    async def _release(self, source: MessageSource, message: IncomingMessage, why: str) -> None:
        _log.warning("message_released", message_id=message.message_id, reason=why)
        self._metrics.released.inc()
        await source.release(message)


def deleted_bytes(verdict: _vf.VerifyResponse) -> int | None:
    """The size the verifier found of what its evidence names; None when it did not know (an
    open ledger, an object store that gave no size, a filesystem copy): never guessed."""
    evidence = verdict.WhichOneof("evidence")
    if evidence == "bookkeeper" and verdict.bookkeeper.HasField("length_bytes"):
        return max(0, verdict.bookkeeper.length_bytes)
    if evidence == "offload" and verdict.offload.HasField("size_bytes"):
        return max(0, verdict.offload.size_bytes)
    return None


def _is_filesystem(evidence: _vf.OffloadEvidence) -> bool:
    return evidence.driver_name.lower() == "filesystem" or bool(evidence.filesystem_path)


def source_name(pdli: _pd.PendingDeleteLedgerInfo) -> str:
    """The PDLI's `Source` as its enum name; a number outside the enum (a forged PDLI can
    carry any) is `UNKNOWN`, so metric labels stay few."""
    try:
        return _pd.Source.Name(pdli.source)
    except ValueError:
        return "UNKNOWN"


def _skip_name(reason: _vf.SkipReason.ValueType) -> str:
    try:
        return _vf.SkipReason.Name(reason).lower()
    except ValueError:
        return "unknown"


def _identity(pdli: _pd.PendingDeleteLedgerInfo | None) -> dict[str, object]:
    """What a dead-letter log line names: the ledger, its owner and the claimed source."""
    if pdli is None:
        return {}
    return {"ledger_id": pdli.ledger_id, "owner": owner_label(pdli), "source": source_name(pdli)}


async def acknowledge_counted(
    source: MessageSource, message: IncomingMessage, metrics: DeleterMetrics
) -> bool:
    """Acknowledge `message` and count it; False when the acknowledgement failed (logged: the
    message comes again and is decided again, every step being idempotent)."""
    try:
        await source.acknowledge(message)
    except TombstoneError as exc:
        _log.warning("acknowledge_failed", message_id=message.message_id, error=str(exc))
        return False
    metrics.acknowledged.inc()
    return True
