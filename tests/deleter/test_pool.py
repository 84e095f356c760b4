"""The pool: bounded window, not-before holding, drain on stop, crash handling."""

from __future__ import annotations

import asyncio
import random
import time
from datetime import timedelta

from services.deleter.handling import Handler
from services.deleter.metrics import DeleterMetrics
from services.deleter.pool import DeleterPool, PoolSettings
from tests.deleter.fakes import (
    FakeBookKeeper,
    FakePublisher,
    FakeSource,
    FakeVerifier,
    delete_verdict,
    incoming,
    pdli,
    retry,
    skip,
)
from tests.helpers import assert_eventually
from tombstone.v1 import verifier_pb2 as _vf


def make_pool(
    handler: Handler,
    source: FakeSource,
    *,
    max_in_flight: int = 100,
    drain_timeout: timedelta = timedelta(seconds=5),
) -> DeleterPool:
    settings = PoolSettings(max_in_flight=max_in_flight, drain_timeout=drain_timeout)
    return DeleterPool(handler, [source], settings=settings, metrics=DeleterMetrics())


async def test_window_bounds_messages_taken_from_the_source(
    handler: Handler, verifier: FakeVerifier
) -> None:
    """With a window of 3 and the verifier stuck, only 3 of 10 messages are received."""
    verifier.gate = asyncio.Event()
    source = FakeSource([incoming(pdli(i)) for i in range(10)])
    pool = make_pool(handler, source, max_in_flight=3)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def three_in_process() -> None:
        assert pool.status().in_process == 3

    await assert_eventually(three_in_process)
    await asyncio.sleep(0.05)
    assert source.received == 3
    verifier.gate.set()

    async def all_acked() -> None:
        assert len(source.acked) == 10

    await assert_eventually(all_acked)
    stop.set()
    await task


async def test_each_message_is_settled_exactly_once_under_mixed_verdicts(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher, dlq_sink: FakePublisher
) -> None:
    """200 messages with random verdicts: each id settled once; retries + DLQ + rest add up."""
    rng = random.Random(7)
    answers = [delete_verdict, lambda i: skip(), lambda i: retry()]
    verdicts = {i: rng.choice(answers)(i) for i in range(200)}
    verifier.answer = lambda p: verdicts[p.ledger_id]
    messages = [incoming(pdli(i)) for i in range(190)] + [incoming(b"junk") for _ in range(10)]
    source = FakeSource(messages)
    pool = make_pool(handler, source, max_in_flight=16)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def all_settled() -> None:
        assert len(source.settled) == 200

    await assert_eventually(all_settled)
    stop.set()
    await task
    retried = sum(1 for i in range(190) if verdicts[i].decision == _vf.RETRY)
    assert sorted(m.message_id for m in messages) == sorted(source.acked)
    assert (retried, 10) == (len(retry_sink.sent), len(dlq_sink.sent))


async def test_not_before_time_is_honoured(handler: Handler, verifier: FakeVerifier) -> None:
    """A PDLI due in the future is held (not verified) until its time, then handled."""
    due_ms = int((time.time() + 0.4) * 1000)
    source = FakeSource([incoming(pdli(5, not_before_ms=due_ms))])
    pool = make_pool(handler, source)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def holding() -> None:
        assert pool.status().holding == 1

    await assert_eventually(holding)
    assert verifier.seen == []

    async def acked() -> None:
        assert len(source.acked) == 1

    await assert_eventually(acked)
    assert time.time() * 1000 >= due_ms
    stop.set()
    await task


async def test_far_future_not_before_is_capped_by_max_hold(
    verifier: FakeVerifier, bookkeeper: FakeBookKeeper, handler: Handler
) -> None:
    """A not-before time years away holds a slot only for max_hold (2 s here), then proceeds."""
    handler._max_hold = 0.05
    far = int((time.time() + 10 * 365 * 86400) * 1000)
    source = FakeSource([incoming(pdli(5, not_before_ms=far))])
    pool = make_pool(handler, source)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def acked() -> None:
        assert len(source.acked) == 1

    await assert_eventually(acked)
    stop.set()
    await task
    assert verifier.seen == [5]


async def test_drain_finishes_started_work_and_gives_back_held_messages(
    handler: Handler, bookkeeper: FakeBookKeeper
) -> None:
    """On stop: a delete in progress completes and is acked; a held PDLI is neither acked nor
    released (closing the consumer gives it back)."""
    bookkeeper.gate = asyncio.Event()
    later = int((time.time() + 60) * 1000)
    working, held = incoming(pdli(1)), incoming(pdli(2, not_before_ms=later))
    source = FakeSource([working, held])
    pool = make_pool(handler, source, drain_timeout=timedelta(seconds=5))
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def both_in() -> None:
        status = pool.status()
        assert (status.in_process, status.holding) == (2, 1)

    await assert_eventually(both_in)
    stop.set()
    await asyncio.sleep(0.05)
    bookkeeper.gate.set()
    await task
    assert ([working.message_id], []) == (source.acked, source.released)


async def test_drain_timeout_cancels_unfinished_work_without_ack(
    handler: Handler, bookkeeper: FakeBookKeeper
) -> None:
    """Work that outlives the drain timeout is cancelled and never acknowledged."""
    bookkeeper.gate = asyncio.Event()
    source = FakeSource([incoming(pdli(1))])
    pool = make_pool(handler, source, drain_timeout=timedelta(milliseconds=50))
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def in_process() -> None:
        assert pool.status().in_process == 1

    await assert_eventually(in_process)
    stop.set()
    await task
    assert (source.acked, source.released, pool.status().in_process) == ([], [], 0)


async def test_handler_crash_releases_the_message(handler: Handler, verifier: FakeVerifier) -> None:
    """An unexpected exception releases the message (the client's backstop counts it)."""
    verifier.answer = _crash
    message = incoming(pdli(1))
    source = FakeSource([message])
    pool = make_pool(handler, source)
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def released() -> None:
        assert [message.message_id] == source.released

    await assert_eventually(released)
    stop.set()
    await task
    assert source.acked == []


async def test_retry_topic_has_its_own_window(handler: Handler, verifier: FakeVerifier) -> None:
    """The retry topic's window is separate (and may be larger): 2 from the system topic and
    5 from the retry topic are taken while the verifier is stuck."""
    verifier.gate = asyncio.Event()
    system = FakeSource([incoming(pdli(i)) for i in range(10)], topic="sys")
    retries = FakeSource([incoming(pdli(i)) for i in range(10, 20)], topic="retry")
    settings = PoolSettings(max_in_flight=2, retry_max_in_flight=5)
    pool = DeleterPool(handler, [system, retries], settings=settings, metrics=DeleterMetrics())
    stop = asyncio.Event()
    task = asyncio.create_task(pool.run(stop))

    async def seven_in_process() -> None:
        assert pool.status().in_process == 7

    await assert_eventually(seven_in_process)
    await asyncio.sleep(0.05)
    assert (system.received, retries.received) == (2, 5)
    verifier.gate.set()
    stop.set()
    await task


async def test_a_redelivery_during_handling_is_settled_by_the_first_outcome(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """A broker disconnect redelivers what the consumer held while the pool still works on
    it. The redelivery is not handled a second time (one verification, one retry copy: no
    second retry chain), and it is acknowledged with the first: that first ack may have been
    lost with the very connection whose loss caused the redelivery."""
    verifier.gate = asyncio.Event()
    verifier.answer = lambda p: retry()
    first = incoming(pdli(5))
    source = FakeSource([first])
    stop, task = _start(make_pool(handler, source))

    async def verifying() -> None:
        assert verifier.seen == [5]

    await assert_eventually(verifying)
    source.put(first)  # the same message id, delivered again
    await assert_eventually(lambda: _received(source, 2))
    verifier.gate.set()

    async def both_acknowledged() -> None:
        assert source.acked == [first.message_id, first.message_id]

    await assert_eventually(both_acknowledged)
    assert (verifier.seen, len(retry_sink.sent)) == ([5], 1)
    source.put(first)  # once settled, a delivery is a message of its own again
    await assert_eventually(lambda: _received(source, 3))
    await assert_eventually(lambda: _seen_twice(verifier))
    stop.set()
    await task


async def test_a_redelivery_of_a_released_message_is_left_to_the_release(
    handler: Handler, verifier: FakeVerifier
) -> None:
    """Released (a handler crash here): the release already asks for a redelivery; the
    delivery that came meanwhile is neither acknowledged nor released again."""
    verifier.gate = asyncio.Event()
    verifier.answer = _crash
    first = incoming(pdli(6))
    source = FakeSource([first])
    stop, task = _start(make_pool(handler, source))
    await assert_eventually(lambda: _received(source, 1))
    source.put(first)
    await assert_eventually(lambda: _received(source, 2))
    verifier.gate.set()

    async def released_once() -> None:
        assert (source.released, source.acked) == ([first.message_id], [])

    await assert_eventually(released_once)
    stop.set()
    await task


async def _received(source: FakeSource, count: int) -> None:
    assert source.received == count


async def _seen_twice(verifier: FakeVerifier) -> None:
    assert verifier.seen == [5, 5]


def _crash(_: object) -> _vf.VerifyResponse:
    raise RuntimeError("bug")


def _start(pool: DeleterPool) -> tuple[asyncio.Event, asyncio.Task[None]]:
    """The pool running until the returned event is set."""
    stop = asyncio.Event()
    return stop, asyncio.create_task(pool.run(stop))
