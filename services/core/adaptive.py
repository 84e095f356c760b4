"""Adaptive concurrency limits: how many requests a dependency (ZooKeeper, S3, the marker) gets
at once, learned from its latency and errors, between an operator's floor and ceiling.

The algorithm is a gradient limit in the style of Netflix's concurrency-limits (Gradient2)
with a multiplicative cut on errors (AIMD's decrease):

- Each window of samples (`window_samples` answers, or `window_seconds`) gives a short-term
  latency, the window's mean. The baseline is the lowest short-term latency of the current
  and the previous period of `baseline_seconds`. At each new period the limit is halved for a
  moment (a probe, as BBR's ProbeRTT): a baseline learned only under the limiter's own queue
  would creep up with it, and the limit with the baseline, up to the ceiling. So a real
  change of the dependency's latency is learned within two periods.
- gradient = tolerance x baseline / short-term, clamped to [0.5, 1]: 1 while the latency
  stays within the tolerance, below 1 as a queue builds up. The new limit is
  limit + sqrt(limit) while the gradient is 1 (growth), limit x gradient otherwise,
  smoothed: limit x (1 - smoothing) + new x smoothing.
- A window in which fewer than half the permits were used says nothing about the dependency
  (the caller had less work): the limit stays, only the baseline learns.
- An error that means "too much" (a timeout, S3 `SlowDown`, ZooKeeper connection loss) cuts
  the limit to limit x backoff at once, at most once per round trip: requests that had started
  before a cut were sent under the old limit, and their failures do not cut again.

An outage is not a latency signal. A run of unanswered requests (timeouts, lost connections)
with no answer in between for `outage_after` seconds is an outage, which the deleter's outage
gate handles by pausing; when answers come back the limit returns to what it was before that
run, rather than crawling up from the floor. A throttling answer (the service is up and asks
for less) is never forgiven that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

_log = structlog.get_logger(__name__)

DEFAULT_INITIAL = 4
"""Where a limit starts unless told otherwise (within its floor and ceiling)."""


class Signal(enum.Enum):
    """What one request's outcome says about the dependency."""

    ANSWERED = "answered"
    """A timely answer, success or a refusal of this request (404, a version conflict): its
    latency is a sample."""
    THROTTLED = "throttled"
    """The service answered "too much" (S3 `SlowDown`, 503, 429): cut."""
    UNANSWERED = "unanswered"
    """No answer (timeout, connection lost): cut; forgiven if it turns out to be an outage."""
    IGNORED = "ignored"
    """Says nothing about the dependency (cancelled, a client-side error)."""


@dataclass(frozen=True)
class LimitSettings:
    min_limit: int = 1
    """The floor: the limit never goes below it."""
    max_limit: int = 64
    """The ceiling: the operator's bound. `min_limit == max_limit` is a static limit."""
    initial_limit: int | None = None
    """Where to start; None: `DEFAULT_INITIAL` within the floor and ceiling."""
    tolerance: float = 2.0
    """Latency may grow to this multiple of the baseline before the limit falls (above
    Gradient2's 1.5: the baseline here is a minimum, which noise makes optimistic)."""
    smoothing: float = 0.2
    """Weight of a window's new limit against the current one."""
    backoff: float = 0.5
    """Factor applied to the limit on an error that means "too much"."""
    window_samples: int = 10
    """Answers per window."""
    window_seconds: float = 1.0
    """A window with at least one answer closes after this long even if not full."""
    baseline_seconds: float = 30.0
    """Period of the baseline's minimum, and of the probe that halves the limit."""
    outage_after: float = 2.0
    """Seconds of unanswered requests without any answer that make an outage (forgiven)."""

    def __post_init__(self) -> None:
        if not 1 <= self.min_limit <= self.max_limit:
            raise ValueError(
                f"need 1 <= min_limit <= max_limit, got {self.min_limit}, {self.max_limit}"
            )
        if not 0 < self.backoff < 1 or not 0 < self.smoothing <= 1 or self.tolerance < 1:
            raise ValueError("need 0 < backoff < 1, 0 < smoothing <= 1, tolerance >= 1")

    def start(self) -> int:
        initial = DEFAULT_INITIAL if self.initial_limit is None else self.initial_limit
        return max(self.min_limit, min(self.max_limit, initial))


class GradientLimit:
    """The limit's arithmetic, on an injected clock (no asyncio: unit tests drive it)."""

    def __init__(self, settings: LimitSettings, *, clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self._limit = float(settings.start())
        self._min_now = float("inf")
        self._min_before = float("inf")
        self._period_start = clock()
        self._window_start = clock()
        self._window: list[float] = []
        self._window_max_in_flight = 0
        self._last_cut = float("-inf")
        self._streak_start: float | None = None
        self._streak_limit = self._limit
        self._streak_unanswered = True

    @property
    def limit(self) -> int:
        return max(self.settings.min_limit, int(self._limit))

    @property
    def baseline(self) -> float:
        """The no-load latency estimate (seconds); infinite before the first window."""
        return min(self._min_now, self._min_before)

    def on_answer(self, latency: float, in_flight: int) -> None:
        """A timely answer after `latency` seconds, with `in_flight` requests out (itself too)."""
        now = self._clock()
        self._end_streak(now)
        if not self._window:
            self._window_start = now
        self._window.append(max(latency, 0.0))
        self._window_max_in_flight = max(self._window_max_in_flight, in_flight)
        full = len(self._window) >= self.settings.window_samples
        if full or now - self._window_start >= self.settings.window_seconds:
            self._close_window()

    def on_drop(self, signal: Signal, started: float) -> None:
        """A request started at `started` (the clock's time) failed with `signal`."""
        now = self._clock()
        if self._streak_start is None:
            self._streak_start, self._streak_limit = now, self._limit
            self._streak_unanswered = True
        if signal is Signal.THROTTLED:
            self._streak_unanswered = False
        if started < self._last_cut:
            return  # sent under the limit before the last cut: that cut answered it
        self._last_cut = now
        self._set(self._limit * self.settings.backoff, why=signal.value)
        self._window.clear()
        self._window_max_in_flight = 0

    def _end_streak(self, now: float) -> None:
        """An answer ends a run of errors; a run of unanswered ones that long was an outage."""
        if self._streak_start is None:
            return
        outage = self._streak_unanswered and now - self._streak_start >= self.settings.outage_after
        self._streak_start = None
        if outage and self._streak_limit > self._limit:
            self._set(self._streak_limit, why="outage_over")
            self._window.clear()
            self._window_max_in_flight = 0

    def _close_window(self) -> None:
        short = sum(self._window) / len(self._window)
        in_flight = self._window_max_in_flight
        self._window.clear()
        self._window_max_in_flight = 0
        if short <= 0:
            return
        limited = in_flight < self._limit / 2  # the caller had less work than the limit
        if self._new_period(short, probe=not limited) or limited:
            return  # nothing learned about the limit this time
        gradient = max(0.5, min(1.0, self.settings.tolerance * self.baseline / short))
        # Room to grow only while the latency is within the tolerance: with it also under a
        # queue, the limit could not fall below 4 (where limit x 0.5 + sqrt(limit) = limit).
        proposed = self._limit * gradient + (math.sqrt(self._limit) if gradient >= 1 else 0.0)
        smoothing = self.settings.smoothing
        self._set(self._limit * (1 - smoothing) + proposed * smoothing, why="")

    def _new_period(self, short: float, *, probe: bool) -> bool:
        """Learn the baseline from `short`; True when a probe halved the limit just now."""
        now = self._clock()
        self._min_now = min(self._min_now, short)
        if now - self._period_start < self.settings.baseline_seconds:
            return False
        self._period_start = now
        self._min_before, self._min_now = self._min_now, float("inf")
        if probe:
            self._set(self._limit / 2, why="")  # measure again below our own queue
        return probe

    def _set(self, value: float, *, why: str) -> None:
        before = self.limit
        floor, ceiling = self.settings.min_limit, self.settings.max_limit
        self._limit = max(float(floor), min(float(ceiling), value))
        if why and self.limit != before:
            _log.info("concurrency_limit", before=before, after=self.limit, why=why)


class Permit:
    """One request's places under the limit (`weight`, 1 unless extended); `release` says
    how it went (once)."""

    def __init__(self, limiter: AdaptiveLimiter, started: float) -> None:
        self._limiter = limiter
        self.started = started
        self.weight = 1
        self.released = False

    def release(self, signal: Signal = Signal.ANSWERED) -> None:
        if not self.released:
            self.released = True
            self._limiter._release(self, signal)


def ignore_errors(_error: BaseException) -> Signal:
    return Signal.IGNORED


class AdaptiveLimiter:
    """At most `limit` requests at once (first come, first served); the limit adapts.

    `classify` maps an exception raised inside `slot()` to a signal (cancellation is always
    IGNORED). Callers that read an outcome from a result rather than an exception acquire a
    `Permit` themselves and release it with the signal."""

    def __init__(
        self,
        settings: LimitSettings,
        *,
        classify: Callable[[BaseException], Signal] = ignore_errors,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._gradient = GradientLimit(settings, clock=clock)
        self._classify = classify
        self._clock = clock
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return self._gradient.limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def settings(self) -> LimitSettings:
        return self._gradient.settings

    def classify(self, error: BaseException) -> Signal:
        """What an exception a request raised says about the dependency."""
        if isinstance(error, asyncio.CancelledError | GeneratorExit):
            return Signal.IGNORED
        return self._classify(error)

    async def acquire(self) -> Permit:
        """Wait for a place under the current limit."""
        if self._waiters or self._in_flight >= self.limit:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            self._wake()  # in case the limit grew since the last release
            try:
                await future
            except BaseException:
                if future.done() and not future.cancelled():
                    self._in_flight -= 1  # granted just as we were cancelled: hand it on
                    self._wake()
                else:
                    with contextlib.suppress(ValueError):  # already passed over by _wake
                        self._waiters.remove(future)
                raise
        else:
            self._in_flight += 1
        return Permit(self, self._clock())

    def extend(self, permit: Permit, more: int) -> int:
        """Add up to `more` places to `permit` from those free now, without waiting (none
        while others wait); how many were added. A request that carries several operations
        (a ZooKeeper multi) then counts each of them."""
        if self._waiters or more <= 0 or permit.released:
            return 0
        granted = max(0, min(more, self.limit - self._in_flight))
        permit.weight += granted
        self._in_flight += granted
        return granted

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Permit]:
        """Hold a place for one request; its latency or its error is recorded on exit."""
        permit = await self.acquire()
        try:
            yield permit
        except BaseException as exc:
            permit.release(self.classify(exc))
            raise
        else:
            permit.release(Signal.ANSWERED)

    def _release(self, permit: Permit, signal: Signal) -> None:
        in_flight = self._in_flight
        self._in_flight -= permit.weight
        if signal is Signal.ANSWERED:
            self._gradient.on_answer(self._clock() - permit.started, in_flight)
        elif signal is not Signal.IGNORED:
            self._gradient.on_drop(signal, permit.started)
        self._wake()

    def _wake(self) -> None:
        """Grant places to waiters, oldest first, while the (possibly new) limit allows."""
        while self._waiters and self._in_flight < self.limit:
            future = self._waiters.popleft()
            if not future.done():
                self._in_flight += 1
                future.set_result(None)


__all__ = [
    "AdaptiveLimiter",
    "GradientLimit",
    "LimitSettings",
    "Permit",
    "Signal",
    "ignore_errors",
]
