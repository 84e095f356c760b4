"""Bounded concurrency and a rate limit per backend, so a large backlog cannot overload the
metadata store or the object store. The rate counts operations (each delete in a ZooKeeper
multi is one); the concurrency bound counts requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiolimiter import AsyncLimiter


class BackendLimits:
    """At most `concurrency` requests at once and `per_second` operations started per second."""

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

    async def pace(self) -> None:
        """Take one unit of the rate (waiting as needed) for an operation that will travel in
        a batch request; the request then holds one `slot`, whatever its size."""
        await self._rate.acquire(1.0)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for a request whose operations were paced already."""
        async with self._slots:
            yield
