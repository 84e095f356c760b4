"""Coalesce concurrent single requests into batch calls (verify batches, DeleteObjects,
ZooKeeper multi).

Callers `await batcher.submit(item)` one at a time; a dispatcher takes whatever has queued up
whenever a batch slot is free, so batches are small when load is light (no added latency)
and grow up to `max_batch` when the backend is the bottleneck. With an `AdaptiveLimiter`, a
batch slot is a place under its limit, taken before the batch is formed (so that batches grow
while the limit holds requests back), and `judge` tells the limiter how the batch went.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from services.core.adaptive import AdaptiveLimiter, Permit, Signal

T = TypeVar("T")
R = TypeVar("R")


class BatcherClosed(RuntimeError):
    """The batcher was closed before the item was sent."""


class Batcher(Generic[T, R]):
    """Runs `run_batch(items) -> results` (same order) with at most `max_concurrency` at once."""

    def __init__(
        self,
        run_batch: Callable[[Sequence[T]], Awaitable[Sequence[R]]],
        *,
        max_batch: int,
        max_concurrency: int = 1,
        limiter: AdaptiveLimiter | None = None,
        judge: Callable[[Sequence[R]], Signal] | None = None,
        weighted: bool = False,
    ) -> None:
        """With `limiter`, it bounds the batches in flight instead of `max_concurrency`; a batch
        whose call raises is judged by the limiter's own classification. `weighted`: each item
        takes a place under the limit (a batch is as large as the places free), else each
        batch takes one."""
        if max_batch <= 0 or max_concurrency <= 0:
            raise ValueError("max_batch and max_concurrency must be positive")
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._slots = asyncio.Semaphore(max_concurrency)
        self._limiter = limiter
        self._judge = judge or (lambda _results: Signal.ANSWERED)
        self._weighted = weighted
        self._pending: list[tuple[T, asyncio.Future[R]]] = []
        self._wakeup = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closed = False

    async def submit(self, item: T) -> R:
        """The result for `item`; the batch call's exception if the whole batch failed."""
        if self._closed:
            raise BatcherClosed("batcher closed")
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        self._wakeup.set()
        if self._dispatcher is None:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="batcher")
        return await future

    async def _dispatch(self) -> None:
        while True:
            await self._wakeup.wait()
            permit = await self._take_slot()
            size = self._max_batch
            if permit is not None and self._weighted and self._limiter is not None:
                self._limiter.extend(permit, min(len(self._pending), size) - 1)
                size = permit.weight
            batch = self._pending[:size]
            del self._pending[:size]
            if not self._pending:
                self._wakeup.clear()
            batch = [(item, fut) for item, fut in batch if not fut.cancelled()]
            if not batch:
                self._give_slot(permit, Signal.IGNORED)
                continue
            task = asyncio.create_task(self._run(batch, permit))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _take_slot(self) -> Permit | None:
        if self._limiter is not None:
            return await self._limiter.acquire()
        await self._slots.acquire()
        return None

    def _give_slot(self, permit: Permit | None, signal: Signal) -> None:
        if permit is None:
            self._slots.release()
        else:
            permit.release(signal)

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]], permit: Permit | None) -> None:
        signal = Signal.IGNORED
        try:
            results = await self._run_batch([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"batch of {len(batch)} answered with {len(results)} results")
        except BaseException as exc:
            if self._limiter is not None and not isinstance(exc, asyncio.CancelledError):
                signal = self._limiter.classify(exc)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
        else:
            signal = self._judge(results)
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
        finally:
            self._give_slot(permit, signal)

    async def aclose(self) -> None:
        """Cancel the dispatcher and running batches; pending callers get `BatcherClosed`."""
        self._closed = True
        tasks = [*self._running, *([self._dispatcher] if self._dispatcher else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for _, future in self._pending:
            if not future.done():
                future.set_exception(BatcherClosed("batcher closed"))
        self._pending.clear()
