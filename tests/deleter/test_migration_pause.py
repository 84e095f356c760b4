"""The deleter during a PIP-454 migration: its real ZooKeeper backend and outage gate on a
`MigrationGuardedStore` over the real ZooKeeper, with Pulsar's migration record written as
`MigrationCoordinator` writes it. The verifier, the system topic and its sinks are the fakes
of the deleter's own ports (`fakes.py`), as in the other handling tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.handling import Backends, Handler
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import Dependency, GateSettings, OutageGate
from services.deleter.pool import DeleterPool, PoolSettings
from services.metadata import BookKeeperLedgers, LedgerMetadata, LedgerPaths, Segment
from services.metadata.migration import MigrationGuardedStore, MigrationPhase, MigrationState
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic.retry import RetryPolicy
from tests.deleter.fakes import FakePublisher, FakeSource, FakeVerifier, incoming, pdli
from tests.helpers import assert_eventually
from tests.metadata.pulsar_migration import TARGET_URL, PulsarMigrationCoordinator
from tombstone.v1 import verifier_pb2 as _vf

LEDGER_ID = 3
FAST = GateSettings(
    probe_interval=timedelta(milliseconds=10), probe_timeout=timedelta(seconds=1), max_waits=3
)


@pytest.fixture
async def source_store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    """Pulsar's session to the source ZooKeeper (the coordinator writes through it)."""
    async with ZkMetadataStore.connect(zk.address, session_timeout=5, request_timeout=5) as s:
        yield s


@pytest.fixture
async def guarded(zk: ZooKeeperServer) -> AsyncIterator[MigrationGuardedStore[ZkMetadataStore]]:
    """The deleter's own session, guarded."""
    async with (
        ZkMetadataStore.connect(zk.address, session_timeout=5, request_timeout=5) as session,
        MigrationGuardedStore(session, retry_delay=0.05) as guard,
    ):
        yield guard


@pytest.fixture
async def backend(
    guarded: MigrationGuardedStore[ZkMetadataStore],
) -> AsyncIterator[ZooKeeperLedgerDeleter]:
    deleter = ZooKeeperLedgerDeleter(
        guarded,
        paths=LedgerPaths(),
        limits=BackendLimits(concurrency=8, per_second=10_000),
        parent_sweep_delay=60,
    )
    yield deleter
    await deleter.aclose()


def ledger(ledger_id: int) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        segments=(Segment(0, ("b1:3181",)),),
        custom_metadata={"application": b"pulsar", "component": b"managed-ledger"},
    )


async def test_copying_pauses_the_deleter_then_failed_lets_it_delete(
    source_store: ZkMetadataStore,
    guarded: MigrationGuardedStore[ZkMetadataStore],
    backend: ZooKeeperLedgerDeleter,
) -> None:
    """During COPYING a verified ledger is not deleted: the deleter pauses on ZooKeeper (its
    probe sees the refusal too, so the pause holds for as long as the copy lasts) and
    acknowledges nothing, dead-letters nothing and spends no retry. Once the coordinator
    writes FAILED the same message is decided again and the ledger znode deleted."""
    ledgers = BookKeeperLedgers(source_store)
    await ledgers.create(ledger(LEDGER_ID))
    path = ledgers.path(LEDGER_ID)
    verifier = FakeVerifier(
        lambda _p: _vf.VerifyResponse(
            decision=_vf.DELETE, bookkeeper=_vf.BookKeeperEvidence(path=path, version=0)
        )
    )
    probes = 0

    async def probe() -> None:
        nonlocal probes
        probes += 1
        await backend.probe()

    metrics = DeleterMetrics()
    gate = OutageGate({Dependency.ZOOKEEPER: probe}, metrics=metrics, settings=FAST)
    retry_sink, dlq_sink = FakePublisher("retry"), FakePublisher("dlq")
    handler = Handler(
        verdicts=verifier,
        backends=Backends(bookkeeper=backend),
        retry_sink=retry_sink,
        dead_letter_sink=dlq_sink,
        policy=RetryPolicy(initial_delay=timedelta(milliseconds=10), max_retries=1),
        max_hold=timedelta(seconds=2),
        metrics=metrics,
        outage=gate,
    )
    coordinator = PulsarMigrationCoordinator(source_store)
    await coordinator.set_initial_migration_phase()
    await coordinator.update_phase(MigrationPhase.COPYING)
    async with asyncio.timeout(10):
        await guarded.follower.wait_for(
            lambda r: r == MigrationState(MigrationPhase.COPYING, TARGET_URL)
        )

    source = FakeSource([incoming(pdli(LEDGER_ID))])
    pool = DeleterPool(
        handler,
        [source],
        settings=PoolSettings(max_in_flight=10, drain_timeout=timedelta(seconds=2)),
        metrics=DeleterMetrics(),
        outage=gate,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def paused_through_many_probes() -> None:
        # Far more probes than `max_waits`: a probe that answered would have let the message
        # meet the refusal again and again, then be retried.
        assert (gate.paused, probes >= 5 * FAST.max_waits) == (
            frozenset({Dependency.ZOOKEEPER}),
            True,
        )

    await assert_eventually(paused_through_many_probes)
    held = (source.settled, retry_sink.sent, dlq_sink.sent, await source_store.exists(path))
    assert held[:3] == ([], [], [])
    assert held[3] is not None

    await coordinator.update_phase(MigrationPhase.FAILED)

    async def acked() -> None:
        assert len(source.acked) == 1

    await assert_eventually(acked)
    stop.set()
    await task
    await gate.aclose()
    assert (await source_store.exists(path), retry_sink.sent, dlq_sink.sent) == (None, [], [])
    assert verifier.seen[-1] == LEDGER_ID
