"""The watched owner cache: about one read per verdict, never a stale "not in use"."""

from __future__ import annotations

from typing import Any

from devstack.zookeeper import ZooKeeperServer
from services.metadata.zk_store import ZkMetadataStore
from services.verifier.model import Decision, SkipReason
from tests.helpers import assert_eventually
from tests.verifier.world import World, pdli


async def test_a_steady_stream_reads_the_owner_once(world: World, parts: Any) -> None:
    """Ten verdicts on one topic: one owner read, ten ledger reads."""
    for ledger_id in range(1, 11):
        await world.ledger(ledger_id)
    await world.ml([20])
    for ledger_id in range(1, 11):
        assert (await parts.engine.verify(pdli(ledger_id))).decision == Decision.DELETE
    reads = parts.metrics.reads
    assert (reads.labels("owner")._value.get(), reads.labels("ledger")._value.get()) == (1, 10)


async def test_a_change_by_another_session_is_seen_at_once(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """After another client lists the ledger again, the very next verdict says IN_USE."""
    await world.ledger(1)
    await world.ml([2])
    assert (await parts.engine.verify(pdli(1))).decision == Decision.DELETE
    async with ZkMetadataStore.connect(zk.address, request_timeout=2.0) as other:
        await World(other).ml([1, 2])
    assert (await parts.engine.verify(pdli(1))).skip_reason == SkipReason.IN_USE


async def test_absence_is_never_cached(world: World, parts: Any) -> None:
    """A deleted topic is read again each time: once it exists and lists the ledger, IN_USE."""
    await world.ledger(1)
    assert (await parts.engine.verify(pdli(1))).decision == Decision.DELETE
    await world.ml([1])
    assert (await parts.engine.verify(pdli(1))).skip_reason == SkipReason.IN_USE


async def test_a_lost_connection_empties_the_cache(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """After the server restarts (watches may be lost), cached owners are read again."""
    await world.ledger(1)
    await world.ml([2])
    await parts.engine.verify(pdli(1))
    zk.stop()
    zk.start()

    async def decided_again() -> None:
        assert (await parts.engine.verify(pdli(1))).decision == Decision.DELETE

    await assert_eventually(decided_again, timeout=30, interval=0.2)
    assert (parts.owners.stats.reads, len(parts.owners)) == (2, 1)
