"""Bounded concurrency and a rate limit per backend, so a large backlog cannot overload the
metadata store or the object store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiolimiter import AsyncLimiter


class BackendLimits:
    """At most `concurrency` operations at once and `per_second` started per second."""

    def __init__(self, *, concurrency: int, per_second: float) -> None:
        if concurrency <= 0 or per_second <= 0:
            raise ValueError("concurrency and per_second must be positive")
        self._slots = asyncio.Semaphore(concurrency)
        # A bucket of one second's worth: bursts never exceed the configured rate.
        self._rate = AsyncLimiter(per_second, 1.0)

    @asynccontextmanager
    async def operation(self, weight: float = 1.0) -> AsyncIterator[None]:
        """Hold one slot and `weight` units of the rate for the duration of an operation."""
        async with self._slots:
            await self._rate.acquire(weight)
            yield
