"""`benchmarks.deleter`'s raw ZooKeeper baselines beside the deleter's BookKeeper run, and the
write-latency probe that runs during each of them.

- get + delete: aiozk reads each ledger znode, then deletes it at the version it read, at
  concurrency 64 (two round trips per ledger: what a deleter without batching would do).
- multi delete: the aiozk session sends ZooKeeper `multi` requests of 100 versioned deletes
  itself (the project's wire encoding, no store layer), a few requests in flight. The versions
  are known (the znodes were just written), so nothing is read: the ceiling of deleting
  ledger znodes from one Python client, which the deleter approaches at best.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import aiozk

from benchmarks._deleter_adaptive import probe
from benchmarks._pool import run_pool
from benchmarks._truth import require
from services.metadata import LedgerPaths
from services.metadata.zookeeper.wire import MultiDeleteRequest, MultiDeleteResponse

MULTI_BATCH = 100
"""Deletes in one raw multi request."""
MULTI_IN_FLIGHT = 4
"""Raw multi requests in flight at once."""


@dataclass(frozen=True)
class Latency:
    """The probe's write latencies during one run, in milliseconds."""

    p50_ms: float
    p99_ms: float
    writes: int

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        if not seconds:
            return cls(float("nan"), float("nan"), 0)
        ordered = sorted(seconds)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return cls(statistics.median(ordered) * 1000, p99 * 1000, len(ordered))

    def __str__(self) -> str:
        return f"p50 {self.p50_ms:.1f} ms, p99 {self.p99_ms:.1f} ms ({self.writes} writes)"


@contextlib.asynccontextmanager
async def probing(address: str) -> AsyncIterator[list[float]]:
    """A probe writing one znode back to back (as a broker updates its managed ledgers) for
    the duration of the block; the list fills with its write latencies in seconds."""
    latencies: list[float] = []
    stop = asyncio.Event()
    task = asyncio.create_task(probe(address, latencies, stop))
    try:
        yield latencies
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await task


async def raw_multi_delete(address: str, ids: Sequence[int]) -> tuple[float, Latency]:
    """Ledgers per second deleted in raw multis of `MULTI_BATCH` versioned deletes (version 0,
    as written), and the probe's latency meanwhile."""
    paths = LedgerPaths()
    batches = [
        [(paths.ledger_path(i), 0) for i in ids[start : start + MULTI_BATCH]]
        for start in range(0, len(ids), MULTI_BATCH)
    ]
    client = aiozk.ZKClient(address)
    await client.start()
    try:

        async def send(batch: list[tuple[str, int]]) -> None:
            response: MultiDeleteResponse = await client.session.send(MultiDeleteRequest(batch))
            require(response.failure(len(batch)) is None, f"raw multi delete of {batch[0][0]}")

        async with probing(address) as latencies:
            started = time.perf_counter()
            await run_pool(batches, MULTI_IN_FLIGHT, send)
            rate = len(ids) / (time.perf_counter() - started)
        return rate, Latency.of(latencies)
    finally:
        await client.close()
