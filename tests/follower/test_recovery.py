"""What the follower does when it misses events: killed and restarted (the checkpoint), its
session expired (a full re-read), and a standby taking over from an active follower."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.marker.follower.checkpoint import CheckpointStore
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.follower.live import SESSION_TIMEOUT, counter, running_follower
from tests.helpers import assert_eventually
from tests.marker.builders import CURSOR_PATH, ML_PATH, cursor_bytes, ledger, ml_bytes
from tests.marker.live import Received, create_system_topic, read_topic, zk_store

QUICK = timedelta(milliseconds=200)


def _ids(received: list[Received]) -> set[int]:
    return {r.pdli.ledger_id for r in received}


async def _checkpointed(writer: ZkMetadataStore, version: int) -> None:
    """Wait until the checkpoint holds the ML at `version`."""

    async def holds() -> None:
        index = await CheckpointStore(writer).load()
        assert index is not None
        entry = index.get(ML_PATH)
        assert entry is not None
        assert entry[1] == version

    await assert_eventually(holds, timeout=10)


async def _trim(writer: ZkMetadataStore, keep: range, version: int) -> None:
    """`ManagedLedgerImpl.internalTrimLedgers`: the shorter list, in one write."""
    await writer.set(ML_PATH, ml_bytes(*(ledger(i) for i in keep)), version=version)


async def test_killed_and_restarted_misses_nothing_the_checkpoint_covers(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """A follower is killed (no last checkpoint) after its checkpoint covered a first trim.
    While none runs, a second trim and an unsubscribe happen. The next follower diffs a full
    read against the checkpoint: both become PDLIs, and the first trim is not sent again."""
    create_system_topic(broker)
    async with zk_store(zk) as writer:
        await writer.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 7))), make_parents=True)
        await writer.create(CURSOR_PATH, cursor_bytes(20))
        async with running_follower(zk.address, broker, checkpoint_interval=QUICK) as first:
            await first.ready()
            await _trim(writer, range(2, 7), version=0)
            assert {1} == _ids(await read_topic(broker, 1))
            await _checkpointed(writer, 1)
            first.kill()
        await _trim(writer, range(4, 7), version=1)
        await writer.delete(CURSOR_PATH, version=0)
        async with running_follower(zk.address, broker, marker_id="second") as second:
            await second.ready()
            received = await read_topic(broker, 3)
            assert counter(second.metrics.full_reads, "checkpoint") == 1
    assert {2, 3, 20} == _ids(received)
    assert len(received) == 3


async def test_session_expiry_is_followed_by_a_full_read(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """The follower's connection is cut for longer than its session timeout: its session
    expires and it misses the events of a trim and an unsubscribe made meanwhile. On its new
    session it leads again, reads everything, and sends both."""
    create_system_topic(broker)
    async with (
        zk_store(zk) as writer,
        ZooKeeperFaultProxy(zk.host, zk.port) as proxy,
    ):
        await writer.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 5))), make_parents=True)
        await writer.create(CURSOR_PATH, cursor_bytes(20))
        async with running_follower(proxy.address, broker) as running:
            await running.ready()
            proxy.cut(2 * SESSION_TIMEOUT)
            await _trim(writer, range(3, 5), version=0)
            await writer.delete(CURSOR_PATH, version=0)
            received = await read_topic(broker, 3)
            assert counter(running.metrics.full_reads, "reconnect") >= 1
            assert proxy.cuts == 1
    assert {1, 2, 20} == _ids(received)


async def test_two_followers_one_active_and_the_standby_takes_over(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """Two followers: one leads and alone publishes (each trim gives exactly its PDLIs). Its
    session expires; the standby takes over, diffs against the checkpoint the first one
    wrote, and sends the trim made during the takeover. The first comes back as standby."""
    create_system_topic(broker)
    async with (
        zk_store(zk) as writer,
        ZooKeeperFaultProxy(zk.host, zk.port) as proxy,
    ):
        await writer.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 6))), make_parents=True)
        async with running_follower(
            proxy.address, broker, marker_id="first", checkpoint_interval=QUICK
        ) as first:
            await first.ready()
            async with running_follower(zk.address, broker, marker_id="second") as second:
                await asyncio.sleep(0)  # the standby is waiting on the leader znode
                await _trim(writer, range(2, 6), version=0)
                assert {1} == _ids(await read_topic(broker, 1))
                assert (first.follower.active, second.follower.active) == (True, False)
                await _checkpointed(writer, 1)
                proxy.cut(2 * SESSION_TIMEOUT)
                await _trim(writer, range(3, 6), version=1)
                await second.ready()
                assert {2} == _ids(await read_topic(broker, 1))

                async def standby() -> None:
                    assert (first.follower.active, second.follower.active) == (False, True)

                await assert_eventually(standby, timeout=15)
                assert counter(second.metrics.full_reads, "checkpoint") == 1
