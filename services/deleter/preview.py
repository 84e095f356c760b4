"""Preview (`TOMBSTONE_DELETER_MODE=preview`): every PDLI verified as before a delete, its
verdict recorded, nothing deleted and nothing the deleters rely on changed.

A preview reads its own subscription (`TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION`, made by
`tombstone setup` at the earliest position) on the system and retry topics, so the deleters'
subscription keeps its whole backlog for when deletion is enabled. The decision is the
deleter's own (`Handler.decide`: wait until due, verify, pause on an outage), with backends
that only run the checks a delete runs before its first request (`preview_backends`). Then,
instead of `Handler.settle`:

- a DELETE verdict is a "would delete", a settling SKIP (in use, not found) a "settled",
  anything that would go to the dead-letter topic a "would dead-letter" with its reason code:
  recorded (audit line `preview_verdict`, metrics, `tombstone deleter status`) once the
  message is acknowledged on the preview subscription;
- a RETRY is a negative acknowledgement: the message comes back after the release delay and
  is decided again; the broker's redelivery count stands for the retry count, so the retry
  budget runs out as it would (then "would dead-letter", `retries_exhausted`).

Nothing is published: no retry copy, no dead letter, no replay. The verifier's `Verify` only
reads (ZooKeeper, S3, the believed set).

A verdict is counted after its acknowledgement, so a message that comes again after a crash
is counted by the deleter that acknowledges it. The status shows this deleter's verdicts since
it started; the metrics add up across replicas and restarts as counters do.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import structlog

from services.core.errors import FailedPrecondition, StartupRefused, TombstoneError
from services.core.logging import audit
from services.deleter.handling import (
    Action,
    Backends,
    Settlement,
    acknowledge_counted,
    deleted_bytes,
    source_name,
)
from services.deleter.metrics import DeleterMetrics
from services.deleter.ports import BookKeeperDeleter, DeleteResult, OffloadDeleter, Tier
from services.systopic.admin import partition_names
from services.systopic.consumer import IncomingMessage, MessageSource
from services.systopic.dead_letter import ReasonCode
from services.systopic.messages import owner_label
from services.systopic.ports import OutgoingMessage, SendResult
from services.systopic.retry import RetryPolicy
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf

_log = structlog.get_logger(__name__)

WOULD_DELETE = "would_delete"
SETTLED = "settled"
WOULD_DEAD_LETTER = "would_dead_letter"
RECENTLY_COUNTED = 100_000
"""Messages remembered as counted (about 150 bytes each). A batch comes again soon after one
of its messages was released, so the last ones suffice."""


# --- backends that delete nothing ----------------------------------------------------------


class _CheckedLedger:
    """A `BookKeeperDeleter` that runs the real backend's checks and deletes nothing."""

    def __init__(self, real: BookKeeperDeleter) -> None:
        self._check = getattr(real, "check", None)

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        if self._check is not None:
            self._check(ledger_id, path, version)
        evidence = {"znode_path": path, "znode_version": version}
        return DeleteResult(Tier.BOOKKEEPER, False, evidence)


class _CheckedOffload:
    """An `OffloadDeleter` that runs the real backend's checks and deletes nothing."""

    def __init__(self, real: OffloadDeleter, tier: Tier) -> None:
        self._check = getattr(real, "check", None)
        self._tier = tier

    async def delete_offloaded(
        self, *, ledger_id: int, evidence: _vf.OffloadEvidence
    ) -> DeleteResult:
        if self._check is not None:
            self._check(ledger_id, evidence)
        if self._tier is Tier.FILESYSTEM:
            return DeleteResult(self._tier, False, {"path": evidence.filesystem_path})
        named: dict[str, object] = {"bucket": evidence.bucket, "keys": list(evidence.keys)}
        if evidence.endpoint:
            named["endpoint"] = evidence.endpoint
        return DeleteResult(self._tier, False, named)


def preview_backends(backends: Backends) -> Backends:
    """The same backends (a tier without one still refuses its PDLIs), deleting nothing."""
    return Backends(
        bookkeeper=_CheckedLedger(backends.bookkeeper) if backends.bookkeeper else None,
        s3=_CheckedOffload(backends.s3, Tier.S3) if backends.s3 else None,
        filesystem=(
            _CheckedOffload(backends.filesystem, Tier.FILESYSTEM) if backends.filesystem else None
        ),
    )


class NoPublishing:
    """The retry, dead-letter and replay sinks of a preview: it publishes nothing, and a call
    that would is refused rather than sent (the real topics are the deleters')."""

    def __init__(self, role: str) -> None:
        self._role = role

    @property
    def producer_name(self) -> str:
        return f"preview-{self._role}"

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        raise FailedPrecondition(f"a preview deleter publishes nothing (to the {self._role} topic)")

    async def close(self) -> None:
        return None


# --- the tally ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PreviewReport:
    """What `tombstone deleter status` shows of a preview."""

    subscription: str
    would_delete: dict[str, int]
    """By tier."""
    would_delete_bytes: dict[str, int]
    """By tier, from the sizes in the verifier's evidence (unknown sizes add nothing)."""
    settled: dict[str, int]
    """By SKIP reason (`in_use`, `not_found`): acknowledged by a deleter too, nothing to do."""
    would_dead_letter: dict[str, int]
    """By reason code."""
    retries: int
    """Decisions deferred (negative acknowledgements): decided again later."""
    since_ms: int
    """When this deleter started counting."""
    deleter_backlog: int = 0
    """The deleters' own subscription: what they will process once deletion is enabled."""


@dataclass
class PreviewTally:
    """Verdicts of this deleter since it started (each acknowledged message once)."""

    subscription: str
    clock: Callable[[], float] = time.time
    would_delete: collections.Counter[str] = field(default_factory=collections.Counter)
    would_delete_bytes: collections.Counter[str] = field(default_factory=collections.Counter)
    settled: collections.Counter[str] = field(default_factory=collections.Counter)
    would_dead_letter: collections.Counter[str] = field(default_factory=collections.Counter)
    retries: int = 0
    since_ms: int = 0

    def __post_init__(self) -> None:
        self.since_ms = int(self.clock() * 1000)

    def report(self, deleter_backlog: int = 0) -> PreviewReport:
        return PreviewReport(
            subscription=self.subscription,
            would_delete=dict(self.would_delete),
            would_delete_bytes=dict(self.would_delete_bytes),
            settled=dict(self.settled),
            would_dead_letter=dict(self.would_dead_letter),
            retries=self.retries,
            since_ms=self.since_ms,
            deleter_backlog=deleter_backlog,
        )


# --- settling a preview ------------------------------------------------------------------


@dataclass(frozen=True)
class _Verdict:
    outcome: str
    detail: str
    """The tier, the SKIP reason or the reason code."""


class PreviewSettler:
    """Settles a decision on the preview subscription: record and acknowledge, or defer."""

    def __init__(
        self,
        tally: PreviewTally,
        *,
        policy: RetryPolicy,
        max_redeliveries: int,
        metrics: DeleterMetrics,
    ) -> None:
        self.tally = tally
        self._policy = policy
        self._max_redeliveries = max_redeliveries
        self._metrics = metrics
        self._counted: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        """The messages counted last (topic, message id), oldest first."""

    async def settle(self, source: MessageSource, message: IncomingMessage, s: Settlement) -> bool:
        """True when the message was acknowledged, False when it comes again later."""
        if (message.topic, message.message_id) in self._counted:
            # Acknowledged and counted already: the broker sent its batch again (a negative
            # acknowledgement of one message of a batch, or a reconnect, redelivers the whole
            # entry). A deleter would find it settled; a preview must not count it twice.
            _log.info("preview_counted_already", message_id=message.message_id)
            try:
                await source.acknowledge(message)
            except TombstoneError as exc:
                _log.warning("acknowledge_failed", message_id=message.message_id, error=str(exc))
            return True
        s = self._final(message, s)
        if s.action in (Action.RETRY, Action.RELEASE):
            self.tally.retries += 1
            self._metrics.preview_retries.inc()
            _log.info("preview_deferred", message_id=message.message_id, reason=s.reason)
            await source.release(message)
            return False
        # Shielded: a stop that cancels this deleter's work must not come between the
        # acknowledgement and the count (the message would be counted by nobody).
        await asyncio.shield(self._acknowledge_and_record(source, message, s))
        return True

    async def _acknowledge_and_record(
        self, source: MessageSource, message: IncomingMessage, s: Settlement
    ) -> None:
        # A failed acknowledgement: it comes again and is decided again, counted then.
        if not await acknowledge_counted(source, message, self._metrics):
            return
        self._record(message, s, _verdict(s))
        self._counted[(message.topic, message.message_id)] = None
        if len(self._counted) > RECENTLY_COUNTED:
            self._counted.popitem(last=False)

    def _final(self, message: IncomingMessage, s: Settlement) -> Settlement:
        """A RETRY past the budget, or a message that kept crashing the handler, is what a
        deleter would dead-letter. Redeliveries stand for the retries a deleter would
        publish: a preview publishes none."""
        if s.action is Action.RETRY:
            attempt = s.attempt + message.redelivery_count
            if self._policy.exhausted(attempt + 1):
                reason = f"after {attempt} retries: {s.reason}"
                code = ReasonCode.RETRIES_EXHAUSTED
                return replace(s, action=Action.DEAD_LETTER, reason=reason, reason_code=code)
        if s.action is Action.RELEASE and message.redelivery_count + 1 >= self._max_redeliveries:
            return replace(
                s, action=Action.DEAD_LETTER, reason_code=ReasonCode.REDELIVERY_EXHAUSTED
            )
        return s

    def _record(self, message: IncomingMessage, s: Settlement, verdict: _Verdict) -> None:
        tally = self.tally
        size = None
        if verdict.outcome == WOULD_DELETE:
            tally.would_delete[verdict.detail] += 1
            size = deleted_bytes(s.verdict) if s.verdict is not None else None
            if size is not None:
                tally.would_delete_bytes[verdict.detail] += size
                self._metrics.preview_would_delete_bytes.labels(verdict.detail).inc(size)
        elif verdict.outcome == SETTLED:
            tally.settled[verdict.detail] += 1
        else:
            tally.would_dead_letter[verdict.detail] += 1
        self._metrics.preview_verdicts.labels(verdict.outcome, verdict.detail).inc()
        audit(
            "preview_verdict",
            outcome=verdict.outcome,
            detail=verdict.detail,
            reason=s.reason,
            message_id=message.message_id,
            topic=message.topic,
            bytes=size,
            **_identity(s.pdli),
            **(s.deleted.evidence if s.deleted is not None else {}),
        )


def _verdict(s: Settlement) -> _Verdict:
    if s.action is Action.ACK and s.deleted is not None:
        return _Verdict(WOULD_DELETE, s.deleted.tier.value)
    if s.action is Action.ACK:
        return _Verdict(SETTLED, s.reason or "settled")
    return _Verdict(WOULD_DEAD_LETTER, (s.reason_code or ReasonCode.UNKNOWN).value)


def _identity(pdli: _pd.PendingDeleteLedgerInfo | None) -> dict[str, object]:
    if pdli is None:
        return {}
    return {
        "ledger_id": pdli.ledger_id,
        "ledger_type": _ledger_type(pdli),
        "owner": owner_label(pdli),
        "source": source_name(pdli),
        "request_id": pdli.request_id,
    }


def _ledger_type(pdli: _pd.PendingDeleteLedgerInfo) -> str:
    try:
        return _pd.LedgerType.Name(pdli.ledger_type)
    except ValueError:
        return "UNKNOWN"


# --- the subscription must be there ------------------------------------------------------


class SubscriptionLister(Protocol):
    """The part of `PulsarAdmin` the start-up check needs."""

    async def subscriptions(self, topic: str) -> list[str] | None:
        """The subscriptions of one topic or partition; None if it does not exist."""
        ...


async def require_preview_subscription(
    admin: SubscriptionLister, topics: list[str], subscription: str, partitions: int
) -> None:
    """`StartupRefused` unless `subscription` exists on every partition of `topics`.

    Subscribing would create it at the client's position, after whatever was published
    before: the preview would miss those PDLIs and report less than the deleters will do.
    And a subscription made by accident outlives the preview with a backlog nobody reads."""
    lacking = []
    for topic in topics:
        for name in partition_names(topic, partitions):
            if subscription not in (await admin.subscriptions(name) or []):
                lacking.append(name)
    if lacking:
        raise StartupRefused(
            f"preview subscription {subscription!r} is missing on {', '.join(lacking)}: "
            "run `tombstone setup` with TOMBSTONE_DELETER_MODE=preview first (it creates it "
            "at the earliest position)"
        )


__all__ = [
    "SETTLED",
    "WOULD_DEAD_LETTER",
    "WOULD_DELETE",
    "NoPublishing",
    "PreviewReport",
    "PreviewSettler",
    "PreviewTally",
    "preview_backends",
    "require_preview_subscription",
]
