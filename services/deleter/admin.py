"""The administration behind the `DeleterAdmin` API: status and the dead-letter topic.

Dead letters stay on a durable subscription of the dead-letter topic until replayed. A scan
opens that subscription exclusively (one scan at a time across the pool), reads until it
is idle or has read enough, and closes it: what it did not acknowledge stays there.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

import structlog

from services.core.errors import Conflict, CorruptData, FailedPrecondition, Unavailable
from services.deleter.pool import PoolStatus
from services.deleter.preview import PreviewReport, PreviewTally
from services.systopic.consumer import IncomingMessage, MessageSource
from services.systopic.dead_letter import DeadLetterEntry, matches, read_dead_letter, replay_message
from services.systopic.ports import IntentPublisher

_log = structlog.get_logger(__name__)


class TopicStats(Protocol):
    async def backlog(self, topic: str, subscription: str) -> int:
        """Unacknowledged messages of `subscription` on `topic`."""
        ...


@dataclass(frozen=True)
class Status:
    system_topic_backlog: int
    retry_topic_backlog: int
    in_process: int
    holding: int
    oldest_pending_age_ms: int
    dead_letter_backlog: int
    dead_letters_by_reason: dict[str, int]
    preview: PreviewReport | None = None
    """In a preview, its verdicts (the backlogs above are then the preview subscription's)."""

    @property
    def mode(self) -> str:
        return "delete" if self.preview is None else "preview"

    @property
    def estimated_in_flight(self) -> int:
        """PIP-186's estimate: both backlogs (which include the messages being processed)."""
        return self.system_topic_backlog + self.retry_topic_backlog


@dataclass(frozen=True)
class Topics:
    system: str
    retry: str
    dead_letter: str
    subscription: str
    """The subscription this deleter reads (a preview's own in a preview)."""
    dead_letter_subscription: str
    deleters_subscription: str = ""
    """The deleters' subscription, when it is not `subscription` (a preview)."""


@dataclass(frozen=True)
class Replayed:
    replayed: int
    not_found: list[str]


OpenScan = Callable[[], AbstractAsyncContextManager[MessageSource]]


class DeleterAdmin:
    def __init__(
        self,
        *,
        topics: Topics,
        stats: TopicStats,
        pool_status: Callable[[], PoolStatus],
        open_scan: OpenScan,
        replay_sink: IntentPublisher,
        scan_max: int = 10_000,
        scan_idle: timedelta = timedelta(milliseconds=500),
        preview: PreviewTally | None = None,
    ) -> None:
        """With `preview`, this deleter is a preview: its status carries the tally, and it
        replays nothing."""
        self._topics = topics
        self._stats = stats
        self._pool_status = pool_status
        self._open_scan = open_scan
        self._replay_sink = replay_sink
        self._scan_max = scan_max
        self._scan_idle = scan_idle.total_seconds()
        self._lock = asyncio.Lock()
        self._preview = preview

    async def status(self) -> Status:
        system, retry, dead = await self.backlogs()
        by_reason: dict[str, int] = {}
        if dead:
            counted = await self.dead_letters_by_reason()
            # None: another deleter is scanning the DLQ right now; report the depth alone.
            by_reason = counted if counted is not None else {}
        pool = self._pool_status()
        return Status(
            system_topic_backlog=system,
            retry_topic_backlog=retry,
            in_process=pool.in_process,
            holding=pool.holding,
            oldest_pending_age_ms=pool.oldest_pending_age_ms,
            dead_letter_backlog=dead,
            dead_letters_by_reason=by_reason,
            preview=await self._preview_report(),
        )

    async def _preview_report(self) -> PreviewReport | None:
        if self._preview is None:
            return None
        t = self._topics
        deleters = t.deleters_subscription or t.subscription
        system, retry = await asyncio.gather(
            self._stats.backlog(t.system, deleters), self._stats.backlog(t.retry, deleters)
        )
        return self._preview.report(deleter_backlog=system + retry)

    async def backlogs(self) -> tuple[int, int, int]:
        """Backlogs of the system, retry and dead-letter topics (three admin calls)."""
        t = self._topics
        system, retry, dead = await asyncio.gather(
            self._stats.backlog(t.system, t.subscription),
            self._stats.backlog(t.retry, t.subscription),
            self._stats.backlog(t.dead_letter, t.dead_letter_subscription),
        )
        return system, retry, dead

    async def dead_letters_by_reason(self) -> dict[str, int] | None:
        """Dead letters counted by reason code (at most `scan_max` read); None when another
        scan holds the dead-letter subscription."""
        try:
            entries, _ = await self.list_dead_letters(limit=self._scan_max)
        except Conflict:
            return None
        return dict(collections.Counter(e.reason_code for e in entries))

    async def list_dead_letters(
        self, *, limit: int, reason_code: str = ""
    ) -> tuple[list[DeadLetterEntry], bool]:
        """Up to `limit` dead letters (oldest first) and whether more matched."""
        async with self._lock, self._open_scan() as source:
            found: list[DeadLetterEntry] = []
            for message in await self._scan(source):
                entry = read_dead_letter(message)
                if matches(entry, reason_code):
                    found.append(entry)
        return found[:limit], len(found) > limit

    async def replay(
        self, *, message_ids: Collection[str], every: bool, reason_code: str = ""
    ) -> Replayed:
        """Publish the chosen dead letters to the system topic, then acknowledge them there."""
        if self._preview is not None:
            raise FailedPrecondition(
                "a preview deleter replays nothing: replay through a deleter that deletes"
            )
        wanted = set(message_ids)
        replayed = 0
        async with self._lock, self._open_scan() as source:
            for message in await self._scan(source):
                entry = read_dead_letter(message)
                if not matches(entry, reason_code):
                    continue
                if not every and entry.message_id not in wanted:
                    continue
                wanted.discard(entry.message_id)
                if await self._replay_one(source, message, entry):
                    replayed += 1
        return Replayed(replayed, sorted(wanted))

    async def _replay_one(
        self, source: MessageSource, message: IncomingMessage, entry: DeadLetterEntry
    ) -> bool:
        try:
            outgoing = replay_message(entry)
        except CorruptData as exc:
            _log.warning("dead_letter_not_replayable", message_id=entry.message_id, error=str(exc))
            return False
        [result] = await self._replay_sink.publish([outgoing])
        if not result.ok:
            raise Unavailable(f"replay of {entry.message_id} not stored: {result.error}")
        await source.acknowledge(message)
        _log.info("dead_letter_replayed", message_id=entry.message_id, reason=entry.reason_code)
        return True

    async def _scan(self, source: MessageSource) -> Sequence[IncomingMessage]:
        """Messages until the subscription is idle for a moment or `scan_max` were read."""
        messages: list[IncomingMessage] = []
        while len(messages) < self._scan_max:
            try:
                messages.append(await asyncio.wait_for(source.receive(), self._scan_idle))
            except TimeoutError:
                break
        return messages
