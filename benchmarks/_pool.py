"""A fixed number of tasks working through a list (how every benchmark drives its calls), and
the per-round ratio of two clients measured back to back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from statistics import median
from typing import TypeVar

T = TypeVar("T")

Rates = dict[str, list[float]]
"""Per client, its rate in each round."""


async def run_pool(
    items: Sequence[T], concurrency: int, work: Callable[[T], Awaitable[object]]
) -> float:
    """Run `work` over every item with `concurrency` workers; return items per second."""
    source: Iterator[T] = iter(items)

    async def worker() -> None:
        for item in source:
            await work(item)

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    return len(items) / (time.perf_counter() - start)


def ratio(rates: Rates, name: str, base: str) -> float:
    """Median of the per-round ratios: both were measured back to back in each round."""
    return median(o / r for o, r in zip(rates[name], rates[base], strict=True))
