"""The in-memory parts' own rules that the differential tests cannot reach: PIP-6
deduplication, redelivery after a lost ack, the client's backstop, watches on a lost
connection, and the virtual clock."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from services.metadata.errors import StoreUnavailable
from services.metadata.store import WatchEvent
from services.systopic.dead_letter import CLIENT_ORIGIN_PROPERTY
from services.systopic.ports import OutgoingMessage
from sim.loop import VirtualLoop
from sim.scheduler import Fault, FaultRates, Scheduler
from sim.topic import ACKED, Consumer, Producer, Topic
from sim.zk import Session, ZooKeeper

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
