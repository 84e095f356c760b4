"""The adaptive concurrency limit on a virtual clock: direction of change, never timings."""

from __future__ import annotations

import asyncio

import pytest

from services.core.adaptive import AdaptiveLimiter, GradientLimit, LimitSettings, Signal


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Server:
    """A dependency that serves `capacity` requests at once in `base` seconds; beyond that,
    requests queue and latency grows in proportion."""

    def __init__(self, capacity: int, base: float = 0.01) -> None:
        self.capacity, self.base = capacity, base

    def latency(self, in_flight: int) -> float:
        return self.base * max(1.0, in_flight / self.capacity)


def run(limit: GradientLimit, clock: Clock, server: Server, rounds: int) -> list[int]:
    """`rounds` round trips with the limit fully used; the limit after each."""
    seen = []
    for _ in range(rounds):
        n = limit.limit
        latency = server.latency(n)
        clock.now += latency
        for _ in range(n):
            limit.on_answer(latency, n)
        seen.append(limit.limit)
    return seen


def make(**kw: object) -> tuple[GradientLimit, Clock]:
    clock = Clock()
    settings = LimitSettings(**{"min_limit": 1, "max_limit": 200, **kw})  # type: ignore[arg-type]
    return GradientLimit(settings, clock=clock), clock


def test_grows_while_latency_is_flat_and_stays_under_the_ceiling() -> None:
    limit, clock = make(max_limit=50)
    seen = run(limit, clock, Server(capacity=1000), 300)
    assert seen[-1] == 50
    assert max(seen) <= 50


def test_latency_rise_makes_it_fall_and_it_recovers_after() -> None:
    limit, clock = make()
    server = Server(capacity=40)
    run(limit, clock, server, 300)
    before = limit.limit
    assert before >= 30
    server.base *= 10  # the dependency slows down: ten times the latency at any load
    during = run(limit, clock, server, 40)
    assert min(during) < before * 0.6
    server.base /= 10
    after = run(limit, clock, server, 300)
    assert after[-1] >= 30


def test_settles_near_the_capacity_rather_than_at_the_ceiling() -> None:
    limit, clock = make(max_limit=500)
    seen = run(limit, clock, Server(capacity=20), 2000)
    assert max(seen[-200:]) < 200  # well under the ceiling: the queue is bounded


def test_a_drop_cuts_multiplicatively_once_per_round_trip() -> None:
    limit, clock = make(initial_limit=64)
    started = clock.now
    clock.now += 1
    limit.on_drop(Signal.THROTTLED, started)
    assert limit.limit == 32
    limit.on_drop(Signal.THROTTLED, started)  # sent before the cut: already answered
    assert limit.limit == 32
    clock.now += 1
    limit.on_drop(Signal.THROTTLED, clock.now - 0.5)  # sent after the cut
    assert limit.limit == 16


def test_floor_holds() -> None:
    limit, clock = make(min_limit=3, initial_limit=8)
    for _ in range(10):
        clock.now += 1
        limit.on_drop(Signal.UNANSWERED, clock.now - 0.1)
    assert limit.limit == 3


def test_an_outage_is_forgiven_when_answers_come_back() -> None:
    limit, clock = make(initial_limit=64, outage_after=2.0)
    for _ in range(10):  # ten seconds of lost connections and timeouts
        clock.now += 1
        limit.on_drop(Signal.UNANSWERED, clock.now - 0.1)
    assert limit.limit == 1
    limit.on_answer(0.01, 1)
    assert limit.limit == 64


def test_a_short_error_run_is_not_an_outage() -> None:
    limit, clock = make(initial_limit=64, outage_after=2.0)
    clock.now += 0.1
    limit.on_drop(Signal.UNANSWERED, clock.now - 0.05)
    clock.now += 0.1
    limit.on_answer(0.01, 1)
    assert limit.limit == 32


def test_throttling_is_never_forgiven() -> None:
    limit, clock = make(initial_limit=64, outage_after=2.0)
    for _ in range(10):
        clock.now += 1
        limit.on_drop(Signal.THROTTLED, clock.now - 0.1)
    limit.on_answer(0.01, 1)
    assert limit.limit == 1


def test_an_idle_caller_does_not_inflate_the_limit() -> None:
    limit, clock = make(initial_limit=10)
    for _ in range(1000):
        clock.now += 0.01
        limit.on_answer(0.01, 2)  # only two requests out at a time
    assert limit.limit == 10


def test_static_when_floor_equals_ceiling() -> None:
    limit, clock = make(min_limit=8, max_limit=8)
    run(limit, clock, Server(capacity=1000), 100)
    clock.now += 1
    limit.on_drop(Signal.THROTTLED, clock.now - 0.1)
    assert limit.limit == 8


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="min_limit"):
        LimitSettings(min_limit=5, max_limit=4)
    with pytest.raises(ValueError, match="backoff"):
        LimitSettings(backoff=1.0)


async def test_limiter_admits_at_most_the_limit_first_come_first_served() -> None:
    clock = Clock()
    limiter = AdaptiveLimiter(LimitSettings(min_limit=2, max_limit=2), clock=clock)
    order: list[int] = []
    gate = asyncio.Event()

    async def work(i: int) -> None:
        async with limiter.slot():
            order.append(i)
            assert limiter.in_flight <= 2
            await gate.wait()

    tasks = [asyncio.create_task(work(i)) for i in range(5)]
    await asyncio.sleep(0)
    assert order == [0, 1]
    gate.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert limiter.in_flight == 0


async def test_limiter_classifies_errors_and_cancellation_frees_the_place() -> None:
    clock = Clock()
    limiter = AdaptiveLimiter(
        LimitSettings(min_limit=1, max_limit=64, initial_limit=8),
        classify=lambda exc: Signal.THROTTLED if isinstance(exc, TimeoutError) else Signal.IGNORED,
        clock=clock,
    )

    async def fail(error: Exception) -> None:
        async with limiter.slot():
            clock.now += 1
            raise error

    with pytest.raises(TimeoutError):
        await fail(TimeoutError())
    assert limiter.limit == 4
    with pytest.raises(KeyError):
        await fail(KeyError("not a signal"))
    assert limiter.limit == 4

    blocker = [await limiter.acquire() for _ in range(4)]
    waiting = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    for permit in blocker:
        permit.release(Signal.IGNORED)
    assert limiter.in_flight == 0


async def test_a_permit_extended_counts_each_of_its_places() -> None:
    clock = Clock()
    limiter = AdaptiveLimiter(LimitSettings(min_limit=8, max_limit=8), clock=clock)
    permit = await limiter.acquire()
    assert limiter.extend(permit, 20) == 7  # only what is free now
    assert (permit.weight, limiter.in_flight) == (8, 8)
    permit.release()
    assert limiter.in_flight == 0
