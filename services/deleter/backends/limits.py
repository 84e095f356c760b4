"""Concurrency and rate per backend, so a large backlog cannot overload the metadata store or
the object store.

Concurrency is adaptive (`services.core.adaptive`): between the operator's floor and ceiling,
it follows the backend's latency and falls at once on errors that mean "too much". The rate is
a fixed ceiling (aiolimiter) that counts operations (each delete in a ZooKeeper multi is one);
the concurrency limit counts requests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from aiolimiter import AsyncLimiter

from services.core.adaptive import AdaptiveLimiter, LimitSettings, Signal, ignore_errors


class BackendLimits:
    """At most `limiter.limit` requests at once and `per_second` operations started per second.

    `concurrency`: an int is a static limit (floor = ceiling); `LimitSettings` an adaptive one.
    `classify` says what an exception raised by a request means for the limit."""

    def __init__(
        self,
        *,
        concurrency: int | LimitSettings,
        per_second: float,
        classify: Callable[[BaseException], Signal] = ignore_errors,
    ) -> None:
        if per_second <= 0:
            raise ValueError("per_second must be positive")
        if isinstance(concurrency, int):
            if concurrency <= 0:
                raise ValueError("concurrency must be positive")
            concurrency = LimitSettings(min_limit=concurrency, max_limit=concurrency)
        self.limiter = AdaptiveLimiter(concurrency, classify=classify)
        # A bucket of one second's worth: bursts never exceed the configured rate.
        self._rate = AsyncLimiter(per_second, 1.0)

    @asynccontextmanager
    async def operation(self, weight: float = 1.0) -> AsyncIterator[None]:
        """`weight` units of the rate, then one place under the limit for the request (the
        rate's wait is not the backend's latency)."""
        await self._rate.acquire(weight)
        async with self.limiter.slot():
            yield

    async def pace(self, weight: float = 1.0) -> None:
        """Take `weight` units of the rate (waiting as needed) for operations that travel in a
        batch request, which then holds one place under the limit whatever its size."""
        await self._rate.acquire(weight)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """One place under the limit for a request whose operations were paced already."""
        async with self.limiter.slot():
            yield
