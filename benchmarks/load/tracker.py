"""Follows every marked (ledger, tier) until it is gone from ZooKeeper or S3, and samples the
backlog (marked, not yet deleted) over time.

Deletion times are observed by polling, so each is late by at most one poll interval; the
latencies reported are "mark answered → absence observed".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from benchmarks.load.workload import Marked
from devstack.simulator.s3 import ObjectStore
from services.core.errors import NotFound
from services.metadata import LedgerPaths, MetadataStore
from tombstone.v1 import pending_delete_pb2 as _pd

TIER_NAMES: dict[int, str] = {_pd.LEDGER: "bookkeeper", _pd.OFFLOAD_LEDGER: "offload"}


@dataclass(frozen=True)
class Sample:
    at: float
    """Seconds since the tracker started."""
    backlog: int
    marked: int
    deleted: dict[str, int]


@dataclass
class Tracker:
    store: MetadataStore
    objects: ObjectStore
    bucket: str
    poll_interval: float = 0.5
    min_age: float = 0.5
    """Marks younger than this are not polled yet."""
    concurrency: int = 64
    started: float = field(default_factory=time.monotonic)
    pending: dict[tuple[int, int], Marked] = field(default_factory=dict)
    marked: list[Marked] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(
        default_factory=lambda: {"bookkeeper": [], "offload": []}
    )
    deleted_at: dict[str, list[float]] = field(
        default_factory=lambda: {"bookkeeper": [], "offload": []}
    )
    samples: list[Sample] = field(default_factory=list)
    paths: LedgerPaths = field(default_factory=LedgerPaths)

    def add(self, marked: Marked) -> None:
        self.marked.append(marked)
        self.pending[(marked.ledger_id, marked.tier)] = marked

    @property
    def deleted(self) -> dict[str, int]:
        return {tier: len(times) for tier, times in self.latencies.items()}

    async def is_gone(self, marked: Marked) -> bool:
        """A successful read shows absence; any error counts as "still there"."""
        if marked.tier == _pd.LEDGER:
            return await self.store.exists(self.paths.ledger_path(marked.ledger_id)) is None
        for key in marked.object_keys:
            try:
                await self.objects.head_metadata(bucket=self.bucket, key=key)
            except NotFound:
                continue
            return False
        return True

    async def poll_once(self) -> None:
        semaphore = asyncio.Semaphore(self.concurrency)

        async def check(marked: Marked) -> None:
            async with semaphore:
                try:
                    gone = await self.is_gone(marked)
                except Exception:
                    return
            if gone and self.pending.pop((marked.ledger_id, marked.tier), None) is not None:
                now = time.monotonic()
                tier = TIER_NAMES[marked.tier]
                self.latencies[tier].append(now - marked.marked_at)
                self.deleted_at[tier].append(now - self.started)

        # Nothing is deleted before the marker's delivery delay: skip the youngest marks.
        due = time.monotonic() - self.min_age
        async with asyncio.TaskGroup() as group:
            for marked in list(self.pending.values()):
                if marked.marked_at <= due:
                    group.create_task(check(marked))
        self.samples.append(
            Sample(
                time.monotonic() - self.started, len(self.pending), len(self.marked), self.deleted
            )
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Poll until `stop` is set."""
        while not stop.is_set():
            await self.poll_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.poll_interval)

    async def drain(self, timeout: float) -> bool:
        """Poll until nothing is pending or `timeout` passes; True when drained."""
        deadline = time.monotonic() + timeout
        while self.pending and time.monotonic() < deadline:
            await asyncio.sleep(self.poll_interval)
            await self.poll_once()
        return not self.pending
