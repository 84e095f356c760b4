"""The batcher coalesces concurrent submissions and maps results back in order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from services.deleter.batching import Batcher, BatcherClosed


async def test_concurrent_submissions_share_batches_up_to_the_limit() -> None:
    """50 concurrent items with max_batch 20 and one slot go out as 20/20/10, results in order."""
    sizes: list[int] = []

    async def run(items: Sequence[int]) -> list[int]:
        sizes.append(len(items))
        await asyncio.sleep(0.01)
        return [item * 2 for item in items]

    batcher: Batcher[int, int] = Batcher(run, max_batch=20, max_concurrency=1)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(50)))
    await batcher.aclose()
    assert [i * 2 for i in range(50)] == results
    assert sum(sizes) == 50
    assert max(sizes) <= 20


async def test_a_failed_batch_fails_each_of_its_items() -> None:
    """The batch call's exception reaches every caller of that batch."""

    async def run(items: Sequence[int]) -> list[int]:
        raise ValueError("backend down")

    batcher: Batcher[int, int] = Batcher(run, max_batch=10)
    results = await asyncio.gather(*(batcher.submit(i) for i in range(3)), return_exceptions=True)
    await batcher.aclose()
    assert [isinstance(r, ValueError) for r in results] == [True, True, True]


async def test_wrong_result_count_is_an_error() -> None:
    """A batch answering with fewer results than items fails instead of misassigning."""

    async def run(items: Sequence[int]) -> list[int]:
        return [1]

    batcher: Batcher[int, int] = Batcher(run, max_batch=10)
    results = await asyncio.gather(batcher.submit(1), batcher.submit(2), return_exceptions=True)
    await batcher.aclose()
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_submit_after_close_is_refused() -> None:
    """A closed batcher refuses new items."""

    async def run(items: Sequence[int]) -> list[int]:
        return list(items)

    batcher: Batcher[int, int] = Batcher(run, max_batch=10)
    await batcher.aclose()
    with pytest.raises(BatcherClosed):
        await batcher.submit(1)
