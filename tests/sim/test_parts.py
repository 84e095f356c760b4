"""The in-memory parts' own rules that the differential tests cannot reach: PIP-6
deduplication, redelivery after a lost ack, the client's backstop, a topic without a
subscription, watches on a lost connection, and the virtual clock."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Coroutine
from typing import Any, TypeVar

from services.metadata.errors import StoreUnavailable
from services.metadata.store import WatchEvent
from services.systopic.dead_letter import CLIENT_ORIGIN_PROPERTY
from services.systopic.ports import OutgoingMessage
from sim.loop import VirtualLoop
from sim.scheduler import Fault, FaultRates, Scheduler
from sim.topic import ACKED, DROPPED, Consumer, Producer, SubscriptionAdmin, Topic
from sim.zk import SESSION_TIMEOUT, Session, ZooKeeper

_T = TypeVar("_T")


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _quiet(seed: int = 0) -> Scheduler:
    sched = Scheduler(seed, FaultRates(0.0, 0.0, 0.0))
    sched.faults_on = False
    return sched


def test_virtual_time_jumps_to_the_next_timer() -> None:
    async def main() -> float:
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    assert _run(main()) == 3600.0


def test_a_resend_with_the_same_sequence_id_is_stored_once() -> None:
    """PIP-6: the broker drops a message whose sequence id is not above the producer's last."""

    async def main() -> Topic:
        topic = Topic("t", _quiet(), partitions=2)
        message = OutgoingMessage(b"x", "1")
        assert topic.append(message, producer="p", sequence_id=0) is not None
        assert topic.append(message, producer="p", sequence_id=0) is None
        assert topic.append(message, producer="q", sequence_id=0) is not None
        # A restarted producer continues after the broker's last sequence id.
        restarted = Producer(topic, "p")
        [result] = await restarted.publish([message])
        assert result.ok
        return topic

    assert len(_run(main()).entries()) == 3


def test_without_subscription_or_retention_a_message_is_not_kept_for_a_later_subscriber() -> None:
    """As the devstack broker (`Broker.retains`, pinned by tests/devstack_pulsar) and Pulsar
    (`ManagedLedgerImpl` keeps no entry that no cursor holds, without retention): the send is
    acknowledged, the message is gone; the first subscribe creates the subscription."""

    async def main() -> None:
        topic = Topic("t", _quiet(), partitions=1, subscribed=False, retained=False)
        admin = SubscriptionAdmin(topic, "sub")
        assert await admin.subscriptions("t-partition-0") == []
        [lost] = await Producer(topic, "p").publish([OutgoingMessage(b"lost", "1")])
        assert lost.ok
        assert topic.entries()[0].state == DROPPED
        assert topic.unacked() == []
        consumer = Consumer(topic, "c")
        assert await admin.subscriptions("t-partition-0") == ["sub"]
        await Producer(topic, "p").publish([OutgoingMessage(b"kept", "1")])
        assert (await consumer.receive()).payload == b"kept"

        retained = Topic("r", _quiet(), partitions=1, subscribed=False, retained=True)
        await Producer(retained, "p").publish([OutgoingMessage(b"kept", "1")])
        assert (await Consumer(retained, "c").receive()).payload == b"kept"

    _run(main())


def test_a_lost_ack_redelivers_what_the_consumer_held() -> None:
    async def main() -> None:
        sched = _quiet()
        topic = Topic("t", sched, partitions=1)
        for key in ("1", "2"):
            topic.append(OutgoingMessage(b"x", key), producer="p", sequence_id=int(key))
        consumer = Consumer(topic, "c")
        first, second = await consumer.receive(), await consumer.receive()
        sched.draw = lambda: Fault.BEFORE  # type: ignore[method-assign]
        await consumer.acknowledge(first)
        del sched.draw  # the class's draw again: faults are off
        states = [(e.state, e.redelivery_count) for e in topic.entries()]
        assert states == [("pending", 1), ("pending", 1)]
        again = Consumer(topic, "d")
        await again.acknowledge(await again.receive())
        await consumer.acknowledge(second)  # an ack is per message, whoever holds it
        assert [e.state for e in topic.entries()] == [ACKED, ACKED]

    _run(main())


def test_the_backstop_moves_a_message_released_too_often() -> None:
    async def main() -> Topic:
        sched = _quiet()
        dlq = Topic("dlq", sched)
        topic = Topic("t", sched, max_redeliveries=2, nack_delay=1.0, backstop=dlq)
        topic.append(OutgoingMessage(b"x", "1"), producer="p", sequence_id=0)
        consumer = Consumer(topic, "c")
        for _ in range(3):
            await consumer.release(await consumer.receive())
        await asyncio.sleep(2.0)  # past the negative-ack delay
        topic.append(OutgoingMessage(b"y", "2"), producer="p", sequence_id=1)
        assert (await consumer.receive()).payload == b"y"
        return dlq

    [moved] = _run(main()).entries()
    assert CLIENT_ORIGIN_PROPERTY in moved.properties


def test_a_lost_connection_fires_the_sessions_watches_and_may_apply_the_write() -> None:
    async def main() -> None:
        sched = _quiet()
        server = ZooKeeper(sched)
        server.create("/a", b"1")
        server.create("/b", b"1")
        reader, writer = Session(server, "reader"), Session(server, "writer")
        _, fired = await reader.get_and_watch("/a")
        _, lost = await writer.get_and_watch("/b")
        sched.draw = lambda: Fault.AFTER  # type: ignore[method-assign]
        try:
            await writer.set("/a", b"2", version=0)
        except StoreUnavailable:
            pass
        else:
            raise AssertionError("a lost answer must raise")
        assert server.versioned("/a").data == b"2"  # applied, though the caller saw an error
        assert lost.result() is WatchEvent.CONNECTION_LOST
        assert fired.result() is WatchEvent.CHANGED

    _run(main())


def test_a_recursive_watch_reports_every_write_below_it_until_the_connection_is_lost() -> None:
    """ZooKeeper 3.6's PERSISTENT_RECURSIVE `addWatch`: creates, changes and deletes at or
    below the path, as many times as they happen; gone with the connection."""

    async def main() -> None:
        sched = _quiet()
        server = ZooKeeper(sched)
        server.create("/w", b"")
        follower, writer = Session(server, "follower"), Session(server, "writer")
        events: list[tuple[WatchEvent, str]] = []
        await follower.add_recursive_watch("/w", lambda kind, path: events.append((kind, path)))
        lost = follower.connection_lost()
        await writer.create("/w/a/b", b"1", make_parents=True)
        await writer.set("/w/a/b", b"2", version=0)
        await writer.set("/w/a/b", b"3", version=1)
        await writer.create("/x", b"")  # not below the watch
        await writer.delete("/w/a/b", version=2)
        assert events == [
            (WatchEvent.CREATED, "/w/a"),
            (WatchEvent.CREATED, "/w/a/b"),
            (WatchEvent.CHANGED, "/w/a/b"),
            (WatchEvent.CHANGED, "/w/a/b"),
            (WatchEvent.DELETED, "/w/a/b"),
        ]
        assert not lost.done()
        sched.draw = lambda: Fault.BEFORE  # type: ignore[method-assign]
        with contextlib.suppress(StoreUnavailable):
            await follower.exists("/w")
        assert lost.done()
        sched.draw = lambda: Fault.NONE  # type: ignore[method-assign]
        await writer.set("/w/a", b"x", version=0)
        assert len(events) == 5  # the watch went with the connection

    _run(main())


def test_an_ephemeral_znode_goes_with_its_session() -> None:
    """An expiry (drawn at a connection loss) deletes the session's ephemerals and gives it a
    new id; a dead process's session expires after the session timeout."""

    async def main() -> None:
        sched = _quiet()
        server = ZooKeeper(sched)
        first, second = Session(server, "first"), Session(server, "second")
        await first.create("/lock/leader", b"me", make_parents=True, ephemeral=True)
        stat = await second.exists("/lock/leader")
        assert stat is not None
        assert stat.ephemeral_owner == first.session_id
        parent = server.stat("/lock")
        assert parent is not None
        assert parent.ephemeral_owner == 0  # parents are never ephemeral
        old = first.session_id
        sched.chance = lambda p: True  # type: ignore[method-assign]
        sched.draw = lambda: Fault.ERROR  # type: ignore[method-assign]
        with contextlib.suppress(StoreUnavailable):
            await first.exists("/lock")
        assert first.session_id != old
        assert server.stat("/lock/leader") is None
        sched.draw = lambda: Fault.NONE  # type: ignore[method-assign]
        await second.create("/lock/leader", b"you", ephemeral=True)
        second.close()
        assert server.stat("/lock/leader") is not None  # until the session times out
        await asyncio.sleep(SESSION_TIMEOUT + 0.1)
        assert server.stat("/lock/leader") is None

    _run(main())


def test_the_clock_reaches_a_timer_asyncio_runs_early() -> None:
    """asyncio runs a timer due within its clock resolution at once when other callbacks are
    ready; the clock moves to it, so a wait until `deadline - now` ends at the deadline (the
    follower's checkpoint timer waited a femtosecond at a time, forever)."""

    async def busy() -> None:
        for _ in range(1000):
            await asyncio.sleep(0)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(62.25923926189542)
        deadline = math.nextafter(math.nextafter(loop.time(), math.inf), math.inf)
        other = asyncio.ensure_future(busy())
        rounds = 0
        while loop.time() < deadline and rounds < 100:
            await asyncio.sleep(deadline - loop.time())
            rounds += 1
        await other
        return rounds

    assert _run(main()) == 1
