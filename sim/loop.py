"""An asyncio event loop on virtual time: when nothing is ready it jumps to the next timer.

The selector never blocks: `select(timeout)` advances the clock by `timeout` and returns no
events. So `asyncio.sleep(300)` costs one loop iteration, and a run's timing depends only on
the scheduler's draws, never on the machine.
"""

from __future__ import annotations

import asyncio
import heapq
import selectors
from collections.abc import Mapping
from typing import Any


class Deadlock(RuntimeError):
    """Nothing is ready and no timer is pending: the simulated system waits forever."""


class _VirtualSelector(selectors.BaseSelector):
    def __init__(self, loop: VirtualLoop) -> None:
        self._loop = loop
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = selectors.SelectorKey(fileobj, 0, events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys.pop(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        self._keys[fileobj] = key = selectors.SelectorKey(fileobj, 0, events, data)
        return key

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise Deadlock("no task is ready and no timer is pending")
        if timeout > 0:
            self._loop.advance(timeout)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._keys

    def close(self) -> None:
        self._keys.clear()


class VirtualLoop(asyncio.SelectorEventLoop):
    """`time()` is virtual seconds since the start of the run."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        super().__init__(_VirtualSelector(self))
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    def _run_once(self) -> None:
        """With nothing ready, jump exactly to the next live timer first; and move the clock
        to any timer asyncio is about to run early (within its clock resolution). Advancing
        by `when - now` instead can fall short by a rounding error, and asyncio runs a timer
        due within the resolution without the clock moving: a service that waits until a
        clock reading (`monotonic() >= deadline`) would then wait again for a few
        femtoseconds forever (the follower's checkpoint timer did)."""
        scheduled: list[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        if not self._ready:  # type: ignore[attr-defined]
            while scheduled and scheduled[0].cancelled():
                handle = heapq.heappop(scheduled)
                handle._scheduled = False  # type: ignore[attr-defined]
                self._timer_cancelled_count -= 1  # type: ignore[attr-defined]
            if scheduled and scheduled[0].when() > self._now:
                self._now = scheduled[0].when()
        # Timers due within the resolution run now: the clock moves to them first.
        horizon = self._now + self._clock_resolution
        # The heap's first timer is the earliest: only when it is within the horizon can any
        # be (scanning the whole heap on every turn cost a seventh of a run's time).
        if scheduled and scheduled[0].when() < horizon:
            # Walk only the heap's nodes below the horizon (a node's children are no earlier
            # than it): the same latest timer as a scan of the whole heap, at a fraction.
            latest, stack = self._now, [0]
            while stack:
                i = stack.pop()
                if i < len(scheduled) and scheduled[i].when() < horizon:
                    latest = max(latest, scheduled[i].when())
                    stack += (2 * i + 1, 2 * i + 2)
            self._now = latest
        super()._run_once()  # type: ignore[misc]
