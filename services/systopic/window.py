"""A bounded, first-come-first-served window of messages in flight."""

from __future__ import annotations

import asyncio
from collections import deque


class InflightWindow:
    """At most `capacity` messages in flight; waiters are served in arrival order.

    A waiter asking for more than is free waits even if later, smaller requests would fit:
    without that, a large Mark could starve behind a stream of small ones.
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"window capacity must be positive, got {capacity}")
        self.capacity = capacity
        self._free = capacity
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def in_flight(self) -> int:
        return self.capacity - self._free

    async def acquire(self, count: int) -> None:
        """Wait until `count` (≤ capacity) slots are free, then take them."""
        if not 0 < count <= self.capacity:
            raise ValueError(f"cannot take {count} slots of a window of {self.capacity}")
        if not self._waiters and self._free >= count:
            self._free -= count
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (count, waiter)
        self._waiters.append(entry)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(count)  # granted just before the cancel: give it back
            else:
                self._waiters.remove(entry)
                self._wake()
            raise

    def release(self, count: int) -> None:
        """Give back `count` slots and wake the waiters that now fit, in order."""
        self._free += count
        if self._free > self.capacity:
            raise RuntimeError("released more window slots than were taken")
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._free:
            count, waiter = self._waiters.popleft()
            self._free -= count
            waiter.set_result(None)
