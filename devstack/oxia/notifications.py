"""A shard's notification log: one batch per committed write that changed user keys."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One key's change in a batch: `kind` is a NotificationType name."""

    kind: str
    version_id: int | None = None
    key_range_last: str | None = None


@dataclass(frozen=True)
class Batch:
    offset: int
    timestamp_ms: int
    changes: dict[str, Change]


class NotificationLog:
    """Committed batches, retained up to `retention` of them, and a wake-up for followers."""

    def __init__(self, retention: int = 100_000) -> None:
        self._batches: deque[Batch] = deque(maxlen=retention)
        self._changed = asyncio.Event()

    def append(self, batch: Batch) -> None:
        self._batches.append(batch)
        # Wake every follower waiting now, then arm the event for the next batch.
        self._changed.set()
        self._changed = asyncio.Event()

    def after(self, offset: int) -> list[Batch]:
        return [b for b in self._batches if b.offset > offset]

    async def follow(self, offset: int) -> AsyncIterator[Batch]:
        """Every batch after `offset`, then each new one as it commits, in offset order."""
        while True:
            changed = self._changed
            for batch in self.after(offset):
                offset = batch.offset
                yield batch
            await changed.wait()
