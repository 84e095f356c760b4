"""Forged PDLIs: each reaches the dead-letter topic (counted by source), at a bounded pace,
held rather than dropped, and without crowding out legitimate work for good."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from structlog.testing import capture_logs

from services.deleter.forged import ForgedLimiter, ForgedPace
from services.deleter.handling import Backends, Handler, Tracker
from services.deleter.metrics import DeleterMetrics
from services.deleter.pool import DeleterPool, PoolSettings
from services.systopic.dead_letter import PROP_REASON_CODE
from services.systopic.retry import RetryPolicy
from tests.deleter.fakes import (
    FakeBookKeeper,
    FakePublisher,
    FakeSource,
    FakeVerifier,
    delete_verdict,
    incoming,
    pdli,
    skip,
)
from tests.helpers import assert_eventually
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf


class FakeTime:
    """A clock that only the limiter's sleeps move."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def forged_pdli(ledger_id: int, source: int = _pd.BROKER) -> _pd.PendingDeleteLedgerInfo:
    p = pdli(ledger_id)
    p.source = source  # type: ignore[assignment]
    return p


def handler_with(
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    dlq_sink: FakePublisher,
    metrics: DeleterMetrics,
    limiter: ForgedLimiter,
) -> Handler:
    return Handler(
        verdicts=verifier,
        backends=Backends(bookkeeper=bookkeeper),
        retry_sink=FakePublisher("retry"),
        dead_letter_sink=dlq_sink,
        policy=RetryPolicy(initial_delay=timedelta(milliseconds=10), max_retries=3),
        max_hold=timedelta(seconds=2),
        metrics=metrics,
        forged=limiter,
    )


# --- the limiter ----------------------------------------------------------------------------


async def test_burst_then_the_rate_per_source() -> None:
    """A burst passes at once; after it each letter waits its turn at the rate, in arrival
    order; another source has its own bucket."""
    t = FakeTime()
    limiter = ForgedLimiter(ForgedPace(rate=2.0, burst=3), clock=t.clock, sleep=t.sleep)
    waits = [await limiter.admit("BROKER") for _ in range(6)]
    assert waits == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5]
    assert await limiter.admit("OPERATOR") == 0.0


async def test_quiet_time_refills_up_to_the_burst() -> None:
    """Tokens come back at the rate, never beyond the burst."""
    t = FakeTime()
    limiter = ForgedLimiter(ForgedPace(rate=1.0, burst=2), clock=t.clock, sleep=t.sleep)
    for _ in range(2):
        await limiter.admit("BROKER")
    t.now += 3600  # an hour of quiet refills two tokens, not 3,600
    waits = [await limiter.admit("BROKER") for _ in range(3)]
    assert waits == [0.0, 0.0, 1.0]


async def test_the_dead_letter_topic_grows_at_most_at_the_rate() -> None:
    """Over any stretch, admitted letters never exceed burst + rate * elapsed."""
    t = FakeTime()
    pace = ForgedPace(rate=5.0, burst=10)
    limiter = ForgedLimiter(pace, clock=t.clock, sleep=t.sleep)
    start = t.now
    admitted_at = []
    for _ in range(200):
        wait = await limiter.admit("BROKER")
        admitted_at.append(t.now + wait)
    elapsed = max(admitted_at) - start
    assert len(admitted_at) <= pace.burst + pace.rate * elapsed + 1e-9


# --- in the handler and the pool ------------------------------------------------------------


async def test_forged_is_counted_by_source_and_dead_lettered_with_its_identity(
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    dlq_sink: FakePublisher,
    metrics: DeleterMetrics,
) -> None:
    """SKIP FORGED: `deleter_forged{source}` counts it under the Source's enum name (a number
    outside the enum is UNKNOWN), it lands in the DLQ as `forged`, and the log line names the
    ledger, the owner and the source."""
    verifier.answer = lambda p: skip(_vf.FORGED)
    handler = handler_with(verifier, bookkeeper, dlq_sink, metrics, ForgedLimiter())
    with capture_logs() as logs:
        for p in (forged_pdli(1, _pd.BROKER), forged_pdli(2, 77)):
            message = incoming(p)
            source = FakeSource()
            settlement = await handler.decide(Tracker(message, received_at=time.time()))
            await handler.settle(source, message, settlement)
            assert source.acked == [message.message_id]

    def forged(source: str) -> float | None:
        return metrics.registry.get_sample_value(
            "tombstone_deleter_forged_total", {"source": source}
        )

    assert (forged("BROKER"), forged("UNKNOWN")) == (1.0, 1.0)
    assert [m.properties[PROP_REASON_CODE] for m in dlq_sink.sent] == ["forged", "forged"]
    [first, second] = [e for e in logs if e["event"] == "pdli_dead_lettered"]
    assert (first["ledger_id"], first["owner"], first["source"]) == (
        1,
        "t/ns/persistent/topic",
        "BROKER",
    )
    assert (second["reason_code"], second["source"]) == ("forged", "UNKNOWN")
    assert bookkeeper.deleted == []


async def test_an_unknown_skip_reason_is_dead_lettered_not_acknowledged(
    verifier: FakeVerifier, bookkeeper: FakeBookKeeper, dlq_sink: FakePublisher
) -> None:
    """A SKIP reason this deleter does not know (a newer verifier's) settles nothing."""
    verifier.answer = lambda p: _vf.VerifyResponse(
        decision=_vf.SKIP,
        skip_reason=99,  # type: ignore[arg-type]
        reason="?",
    )
    handler = handler_with(verifier, bookkeeper, dlq_sink, DeleterMetrics(), ForgedLimiter())
    message = incoming(pdli(5))
    settlement = await handler.decide(Tracker(message, received_at=time.time()))
    await handler.settle(FakeSource(), message, settlement)
    assert [m.properties[PROP_REASON_CODE] for m in dlq_sink.sent] == ["unknown"]


async def test_excess_forged_are_held_not_dropped_and_real_work_goes_on(
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    dlq_sink: FakePublisher,
    metrics: DeleterMetrics,
) -> None:
    """Beyond the burst, forged PDLIs wait in the window (backpressure, nothing released or
    dropped) while a legitimate PDLI behind them is still deleted; every forged one reaches
    the DLQ in the end."""
    forged_ids = set(range(1, 6))
    verifier.answer = lambda p: (
        skip(_vf.FORGED) if p.ledger_id in forged_ids else delete_verdict(p.ledger_id)
    )
    limiter = ForgedLimiter(ForgedPace(rate=1.0, burst=1))  # the last one waits 4 s
    handler = handler_with(verifier, bookkeeper, dlq_sink, metrics, limiter)
    messages = [incoming(forged_pdli(i)) for i in sorted(forged_ids)] + [incoming(pdli(50))]
    source = FakeSource(messages)
    pool = DeleterPool(
        handler,
        [source],
        settings=PoolSettings(max_in_flight=10, drain_timeout=timedelta(seconds=2)),
        metrics=DeleterMetrics(),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def real_one_deleted_while_forged_wait() -> None:
        assert [d[0] for d in bookkeeper.deleted] == [50]
        assert pool.status().holding >= 1

    await assert_eventually(real_one_deleted_while_forged_wait)

    async def all_settled() -> None:
        assert len(source.acked) == 6

    await assert_eventually(all_settled, timeout=30)
    stop.set()
    await task
    assert source.released == []
    assert len(dlq_sink.sent) == 5
    assert metrics.registry.get_sample_value("tombstone_deleter_forged_waiting") == 0
