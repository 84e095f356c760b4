"""`tombstone deleter status` as gauges: backlogs and dead letters by reason, refreshed on a timer.

The oldest pending age is read from the pool at each scrape (it is local and cheap). The
backlogs cost three Pulsar admin calls per refresh; counting dead letters by reason means
reading the dead-letter subscription, so that scan runs only when the dead-letter depth changed
since the last count, and reads at most the admin's `scan_max` messages. A refresh that fails
keeps the previous values and counts the failure: the refresh timestamp shows how old they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

import structlog

from services.deleter.metrics import DeleterMetrics
from services.deleter.pool import PoolStatus
from services.systopic.dead_letter import ReasonCode

_log = structlog.get_logger(__name__)


class StatusSource(Protocol):
    async def backlogs(self) -> tuple[int, int, int]:
        """System, retry and dead-letter backlogs."""
        ...

    async def dead_letters_by_reason(self) -> dict[str, int] | None:
        """Counts by reason code, or None when the dead-letter subscription is busy."""
        ...


class StatusGauges:
    def __init__(
        self,
        source: StatusSource,
        metrics: DeleterMetrics,
        *,
        pool_status: Callable[[], PoolStatus],
        interval: timedelta,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._source = source
        self._metrics = metrics
        self._interval = interval.total_seconds()
        self._clock = clock
        self._counted_depth: int | None = None
        """Dead-letter depth when the reasons were last counted (None: never)."""
        # Every reason is exported from the start, at 0: an alert on growth then has a series.
        self._reasons: set[str] = {code.value for code in ReasonCode}
        for reason in self._reasons:
            metrics.dead_letters.labels(reason).set(0)
        metrics.oldest_pending_age.set_function(lambda: pool_status().oldest_pending_age_ms / 1000)

    async def refresh(self) -> bool:
        """One refresh; False (values kept, failure counted and logged) when it failed."""
        try:
            system, retry, dead = await self._source.backlogs()
            self._metrics.system_topic_backlog.set(system)
            self._metrics.retry_topic_backlog.set(retry)
            self._metrics.dead_letter_backlog.set(dead)
            if dead != self._counted_depth:
                counted = await self._source.dead_letters_by_reason() if dead else {}
                if counted is not None:
                    self._set_reasons(counted)
                    self._counted_depth = dead
        except Exception as exc:  # an admin or DLQ outage must not stop the deleter
            self._metrics.status_refresh_failures.inc()
            _log.warning("status_refresh_failed", error=str(exc))
            return False
        self._metrics.status_refreshed.set(self._clock())
        return True

    def _set_reasons(self, counted: dict[str, int]) -> None:
        self._reasons |= counted.keys()
        for reason in self._reasons:
            self._metrics.dead_letters.labels(reason).set(counted.get(reason, 0))

    async def run(self, stopping: asyncio.Event) -> None:
        """Refresh now, then every interval, until `stopping` is set."""
        while not stopping.is_set():
            await self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), self._interval)
