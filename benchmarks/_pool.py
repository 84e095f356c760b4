"""A fixed number of tasks working through a list: how every benchmark drives its calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


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
