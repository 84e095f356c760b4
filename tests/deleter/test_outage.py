"""The outage gate: an outage pauses the work, spends no retry, releases nothing, and the
deleter resumes by itself once a probe finds the dependency back."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest
from structlog.testing import capture_logs

from services.core.errors import Unavailable
from services.deleter.handling import Backends, Handler
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import Dependency, GateSettings, OutageGate, Probe, verdict_outage
from services.deleter.pool import DeleterPool, PoolSettings
from services.deleter.ports import DeleteFailed, Tier, VerifierUnreachable
from services.systopic.retry import RetryPolicy
from tests.deleter.fakes import (
    FakeBookKeeper,
    FakePublisher,
    FakeSource,
    FakeVerifier,
    delete_verdict,
    incoming,
    pdli,
    retry,
)
from tests.helpers import assert_eventually
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf

FAST = GateSettings(
    probe_interval=timedelta(milliseconds=10), probe_timeout=timedelta(seconds=1), max_waits=10
)


class Dependencies:
    """Which dependencies are up; the probes and the fakes read it."""

    def __init__(self) -> None:
        self.down: set[Dependency] = set()
        self.probes: dict[Dependency, int] = dict.fromkeys(Dependency, 0)

    def probe(self, dependency: Dependency) -> Probe:
        async def check() -> None:
            self.probes[dependency] += 1
            if dependency in self.down:
                raise Unavailable(f"{dependency} is down")

        return check


@pytest.fixture
def deps() -> Dependencies:
    return Dependencies()


@pytest.fixture
def gate(deps: Dependencies, metrics: DeleterMetrics) -> OutageGate:
    return OutageGate({d: deps.probe(d) for d in Dependency}, metrics=metrics, settings=FAST)


@pytest.fixture
def gated(
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    retry_sink: FakePublisher,
    dlq_sink: FakePublisher,
    metrics: DeleterMetrics,
    gate: OutageGate,
) -> Handler:
    return Handler(
        verdicts=verifier,
        backends=Backends(bookkeeper=bookkeeper),
        retry_sink=retry_sink,
        dead_letter_sink=dlq_sink,
        policy=RetryPolicy(initial_delay=timedelta(milliseconds=10), max_retries=1),
        max_hold=timedelta(seconds=2),
        metrics=metrics,
        outage=gate,
    )


def paused_gauge(metrics: DeleterMetrics, dependency: Dependency) -> float | None:
    return metrics.registry.get_sample_value(
        "tombstone_deleter_paused", {"dependency": dependency.value}
    )


def run_pool(handler: Handler, source: FakeSource, gate: OutageGate) -> DeleterPool:
    return DeleterPool(
        handler,
        [source],
        settings=PoolSettings(max_in_flight=100, drain_timeout=timedelta(seconds=2)),
        metrics=DeleterMetrics(),
        outage=gate,
    )


# --- the gate on its own --------------------------------------------------------------------


async def test_one_log_line_and_gauge_per_transition(
    gate: OutageGate, deps: Dependencies, metrics: DeleterMetrics
) -> None:
    """Many reports of one outage log one pause; the probe resumes by itself, logged once."""
    deps.down.add(Dependency.ZOOKEEPER)
    with capture_logs() as logs:
        for _ in range(50):
            gate.report(Dependency.ZOOKEEPER, "connection lost")
        assert gate.paused == {Dependency.ZOOKEEPER}
        assert paused_gauge(metrics, Dependency.ZOOKEEPER) == 1

        async def probed_twice() -> None:
            assert deps.probes[Dependency.ZOOKEEPER] >= 2

        await assert_eventually(probed_twice)
        assert gate.paused == {Dependency.ZOOKEEPER}  # failed probes keep it paused
        deps.down.clear()
        await asyncio.wait_for(gate.wait_open(), 5)
    events = [(e["event"], e.get("dependency")) for e in logs if "deleter_" in e["event"]]
    assert events == [("deleter_paused", "zookeeper"), ("deleter_resumed", "zookeeper")]
    assert (gate.paused, paused_gauge(metrics, Dependency.ZOOKEEPER)) == (frozenset(), 0)
    await gate.aclose()


async def test_open_only_when_every_dependency_is_back(
    gate: OutageGate, deps: Dependencies
) -> None:
    """Two outages at once: the gate opens after the later one ends; watchers see exactly the
    two transitions (paused, open)."""
    seen = gate.version
    deps.down.update({Dependency.S3, Dependency.VERIFIER})
    gate.report(Dependency.S3, "503")
    gate.report(Dependency.VERIFIER, "connection refused")
    seen = await asyncio.wait_for(gate.wait_change(seen), 5)
    assert gate.paused == {Dependency.S3, Dependency.VERIFIER}
    deps.down.discard(Dependency.S3)

    async def s3_back() -> None:
        assert gate.paused == {Dependency.VERIFIER}

    await assert_eventually(s3_back)
    assert gate.version == seen  # still paused: no transition
    deps.down.clear()
    await asyncio.wait_for(gate.wait_change(seen), 5)
    assert gate.paused == frozenset()
    await gate.aclose()


async def test_a_report_older_than_the_resume_does_not_pause_again(
    gate: OutageGate, deps: Dependencies
) -> None:
    """An attempt that began before the probe found ZooKeeper back and failed late (a slow
    answer from the outage) does not close the gate again; a new failure does."""
    deps.down.add(Dependency.ZOOKEEPER)
    started = gate.now()
    gate.report(Dependency.ZOOKEEPER, "no answer", since=started)
    deps.down.clear()
    await asyncio.wait_for(gate.wait_open(), 5)
    gate.report(Dependency.ZOOKEEPER, "late answer from the outage", since=started)
    assert gate.paused == frozenset()
    gate.report(Dependency.ZOOKEEPER, "a new outage", since=gate.now())
    assert gate.paused == {Dependency.ZOOKEEPER}
    await asyncio.wait_for(gate.wait_open(), 5)
    await gate.aclose()


def test_verdict_outage_reads_the_verifier_code() -> None:
    """Only a RETRY that names ZooKeeper or S3 is an outage; a bare `unavailable` (an answer
    that refused) and every other verdict are not."""
    cases = {
        "unavailable_zookeeper: unknown state: /ledgers/00: no answer": Dependency.ZOOKEEPER,
        "unavailable_s3: unknown state: HEAD s3://b/k: 503": Dependency.S3,
        "unavailable: unknown state: bucket 'b' is not reachable: 403": None,
        "owner version 3 is below the fence token 4": None,
    }
    got = {reason: verdict_outage(retry(reason)) for reason in cases}
    assert got == cases
    skip = _vf.VerifyResponse(decision=_vf.SKIP, reason="unavailable_zookeeper: x")
    assert verdict_outage(skip) is None


# --- the handler and the pool behind the gate -----------------------------------------------


async def test_verifier_down_pauses_then_deletes_with_no_retry_spent(
    gated: Handler,
    gate: OutageGate,
    deps: Dependencies,
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    retry_sink: FakePublisher,
    dlq_sink: FakePublisher,
) -> None:
    """While the verifier does not answer, messages wait (neither retried nor released) and
    the receive loop takes no new one; once it is back, everything is deleted and acked."""
    deps.down.add(Dependency.VERIFIER)

    def answer(p: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        if Dependency.VERIFIER in deps.down:
            raise VerifierUnreachable("verifier: UNAVAILABLE: connection refused")
        return delete_verdict(p.ledger_id)

    verifier.answer = answer
    first = [incoming(pdli(i)) for i in range(5)]
    source = FakeSource(first)
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def paused_and_holding() -> None:
        assert gate.paused == {Dependency.VERIFIER}
        assert pool.status().holding >= 1

    await assert_eventually(paused_and_holding)
    later = [incoming(pdli(i)) for i in range(5, 10)]
    for message in later:
        source.put(message)
    await asyncio.sleep(0.1)
    taken = source.received
    assert taken < 10  # the loop waits at the gate: the later messages stay in the source
    assert (source.acked, source.released, retry_sink.sent) == ([], [], [])
    deps.down.clear()

    async def all_acked() -> None:
        assert len(source.acked) == 10

    await assert_eventually(all_acked)
    stop.set()
    await task
    assert sorted(d[0] for d in bookkeeper.deleted) == list(range(10))
    assert (source.released, retry_sink.sent, dlq_sink.sent) == ([], [], [])


async def test_zookeeper_outage_verdict_waits_for_zookeeper(
    gated: Handler,
    gate: OutageGate,
    deps: Dependencies,
    verifier: FakeVerifier,
    retry_sink: FakePublisher,
    metrics: DeleterMetrics,
) -> None:
    """RETRY `unavailable_zookeeper` from the verifier pauses on ZooKeeper (probed by the
    deleter itself), not on the verifier, and spends no retry."""
    deps.down.add(Dependency.ZOOKEEPER)

    def answer(p: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        if Dependency.ZOOKEEPER in deps.down:
            return retry("unavailable_zookeeper: unknown state: /ledgers: no answer within 3s")
        return delete_verdict(p.ledger_id)

    verifier.answer = answer
    source = FakeSource([incoming(pdli(1))])
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def paused() -> None:
        assert gate.paused == {Dependency.ZOOKEEPER}
        assert deps.probes[Dependency.ZOOKEEPER] >= 1

    await assert_eventually(paused)
    deps.down.clear()

    async def acked() -> None:
        assert len(source.acked) == 1

    await assert_eventually(acked)
    stop.set()
    await task
    assert retry_sink.sent == []
    assert (
        metrics.registry.get_sample_value(
            "tombstone_deleter_outage_waits_total", {"dependency": "zookeeper"}
        )
        == 1.0
    )


async def test_delete_outage_decides_again_after_the_store_is_back(
    gated: Handler,
    gate: OutageGate,
    deps: Dependencies,
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    retry_sink: FakePublisher,
) -> None:
    """A ZooKeeper outage during the delete pauses; the PDLI is verified again (fresh
    evidence) and deleted once ZooKeeper answers."""
    deps.down.add(Dependency.ZOOKEEPER)
    bookkeeper.fail = DeleteFailed(Tier.BOOKKEEPER, "connection lost", outage=True)
    source = FakeSource([incoming(pdli(3))])
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def paused() -> None:
        assert gate.paused == {Dependency.ZOOKEEPER}

    await assert_eventually(paused)
    bookkeeper.fail = None
    deps.down.clear()

    async def acked() -> None:
        assert len(source.acked) == 1

    await assert_eventually(acked)
    stop.set()
    await task
    assert (verifier.seen, bookkeeper.deleted[0][0], retry_sink.sent) == ([3, 3], 3, [])


async def test_outage_the_probe_does_not_see_is_bounded_then_retried(
    gated: Handler, gate: OutageGate, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """S3 answers the deleter's probe but the verifier keeps saying `unavailable_s3`: after
    `max_waits` waits the verdict is an ordinary RETRY, so no message is stuck for ever."""
    gate.settings = replace(FAST, max_waits=3)
    verifier.answer = lambda p: retry("unavailable_s3: unknown state: HEAD s3://b/k: 503")
    source = FakeSource([incoming(pdli(4))])
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def retried() -> None:
        assert len(retry_sink.sent) == 1

    await assert_eventually(retried)
    stop.set()
    await task
    assert len(verifier.seen) == 4  # the first try and one after each of the 3 waits


async def test_refusal_is_not_an_outage(
    gated: Handler, gate: OutageGate, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """A RETRY that is not an outage (a 403, a fence not reached) goes to the retry topic
    at once and pauses nothing."""
    verifier.answer = lambda p: retry("unavailable: unknown state: bucket 'b': AccessDenied")
    source = FakeSource([incoming(pdli(5))])
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def retried() -> None:
        assert len(retry_sink.sent) == 1

    await assert_eventually(retried)
    stop.set()
    await task
    assert gate.paused == frozenset()


async def test_an_error_the_verifier_answered_is_not_an_outage(
    gated: Handler, gate: OutageGate, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """An error status from the verifier (a bug on one PDLI) is retried, pausing nothing: one
    poison PDLI cannot stall the deleter."""

    def crash(_: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        raise Unavailable("verifier: INTERNAL: internal error")

    verifier.answer = crash
    source = FakeSource([incoming(pdli(6))])
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def retried() -> None:
        assert len(retry_sink.sent) == 1

    await assert_eventually(retried)
    stop.set()
    await task
    assert gate.paused == frozenset()


async def test_drain_while_paused_gives_the_messages_back_unsettled(
    gated: Handler, gate: OutageGate, deps: Dependencies, verifier: FakeVerifier
) -> None:
    """Stopping during an outage settles nothing: held messages are neither acknowledged nor
    released (closing the consumer gives them back without counting a release)."""
    deps.down.add(Dependency.VERIFIER)
    verifier.answer = lambda p: (_ for _ in ()).throw(VerifierUnreachable("verifier down"))
    source = FakeSource([incoming(pdli(i)) for i in range(3)])
    pool = run_pool(gated, source, gate)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def paused() -> None:
        assert gate.paused
        assert pool.status().in_process >= 1

    await assert_eventually(paused)
    stop.set()
    await asyncio.wait_for(task, 5)
    await gate.aclose()
    assert (source.acked, source.released) == ([], [])
