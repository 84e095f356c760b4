"""Best-effort reports of unlinked ledgers to the verifier's believed set (docs/design.md §4.3).

A report is an optimisation: the verifier skips its metadata-match check for believed PDLIs.
So a failed or dropped report costs only that shortcut, and it never fails or delays a Mark
call: reports run in background tasks, at most `max_pending` at a time, extras are dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import structlog

from services.core.tasks import is_cancelled
from services.marker.metrics import MarkerMetrics
from tombstone.v1 import pending_delete_pb2 as _pd

_log = structlog.get_logger(__name__)

REPORT_CHUNK = 5000

#: How long closing waits for reports in flight before cancelling them (seconds): a report
#: is one verifier call, normally milliseconds; an unreachable verifier must not hold a stop.
CLOSE_GRACE = 5.0


class BelieveClient(Protocol):
    """The verifier's `Believe` RPC."""

    async def believe(self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]) -> None: ...


class BackgroundBeliever:
    """`Believer` that sends reports in bounded background tasks."""

    def __init__(
        self, client: BelieveClient, metrics: MarkerMetrics, *, max_pending: int = 64
    ) -> None:
        self._client = client
        self._metrics = metrics
        self._max_pending = max_pending
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, payloads: Sequence[bytes]) -> None:
        if not payloads:
            return
        if len(self._tasks) >= self._max_pending:
            self._metrics.believe_failures.inc()
            _log.warning("believe_dropped", pdlis=len(payloads), pending=len(self._tasks))
            return
        task = asyncio.create_task(self._report(list(payloads)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _report(self, payloads: list[bytes]) -> None:
        pdlis = [_pd.PendingDeleteLedgerInfo.FromString(p) for p in payloads]
        try:
            # Chunks keep each call well inside gRPC's default 4 MiB message limit.
            for start in range(0, len(pdlis), REPORT_CHUNK):
                await self._client.believe(pdlis[start : start + REPORT_CHUNK])
        except BaseException as exc:
            if is_cancelled(exc):
                raise
            self._metrics.believe_failures.inc()
            _log.warning("believe_failed", pdlis=len(pdlis), error=str(exc))

    async def aclose(self, grace: float = CLOSE_GRACE) -> None:
        """Give the reports in flight up to `grace` seconds, then cancel the rest. A marker
        that stops right after a Mark call (a rolling restart) would otherwise drop the
        reports of its last calls, and their OPEN ledgers would wait for another proof."""
        if self._tasks and grace > 0:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
