"""A shard's notification log: one batch per committed write that changed user keys."""

from __future__ import annotations

import asyncio
import bisect
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


class StreamDropped(Exception):
    """The server ended the streams following the log (a fault injected by a test)."""


class NotificationLog:
    """Committed batches in offset order, the last `retention` of them kept, and a wake-up
    for the streams that follow the log."""

    def __init__(self, retention: int = 100_000) -> None:
        self._retention = retention
        self._batches: list[Batch] = []
        self._offsets: list[int] = []
        self._changed = asyncio.Event()
        self._drops = 0

    def drop_followers(self) -> None:
        """End every stream following the log now, as a server restart or a network cut
        would; the clients reconnect from their last offset."""
        self._drops += 1
        self._changed.set()
        self._changed = asyncio.Event()

    def append(self, batch: Batch) -> None:
        self._batches.append(batch)
        self._offsets.append(batch.offset)
        if len(self._batches) >= 2 * self._retention:
            # Trimmed in halves, so appending stays cheap on average.
            del self._batches[: -self._retention]
            del self._offsets[: -self._retention]
        # Wake every follower waiting now, then arm a new event for the next batch.
        self._changed.set()
        self._changed = asyncio.Event()

    def after(self, offset: int) -> list[Batch]:
        return self._batches[bisect.bisect_right(self._offsets, offset) :]

    async def follow(self, offset: int) -> AsyncIterator[Batch]:
        """Every retained batch after `offset`, then each new one as it commits, in order."""
        drops = self._drops
        while True:
            if self._drops != drops:
                raise StreamDropped
            changed = self._changed
            for batch in self.after(offset):
                offset = batch.offset
                yield batch
            await changed.wait()
