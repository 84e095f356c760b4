"""The pool: receive loops with a bounded window, one task per message, drain and status.

Memory is bounded under any backlog (L2): each topic's loop holds at most `max_in_flight`
messages (received and not settled, whether waiting for their not-before time, being
verified or being deleted), and the client prefetches at most its receiver queue.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import structlog

from services.core.errors import TombstoneError
from services.deleter.handling import Action, Handler, Phase, Settlement, Tracker
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import OutageGate
from services.systopic.consumer import IncomingMessage, MessageSource

_log = structlog.get_logger(__name__)
_RECEIVE_BACKOFF = 1.0


@dataclass(frozen=True)
class PoolSettings:
    max_in_flight: int = 2000
    """Messages per topic received and not yet settled."""
    retry_max_in_flight: int | None = None
    """The same for the retry topic, whose messages mostly wait out their backoff in the
    window: a larger window lets more retries wait at once. None: as `max_in_flight`."""
    drain_timeout: timedelta = timedelta(seconds=8)
    """On stop, how long work already verified or deleting may take to finish."""


@dataclass(frozen=True)
class PoolStatus:
    in_process: int
    """Messages received and not yet settled."""
    holding: int
    """Of those, how many wait for their not-before time."""
    oldest_pending_age_ms: int
    """Age of the oldest of them (since it was published), 0 when none."""


class DeleterPool:
    def __init__(
        self,
        handler: Handler,
        sources: Sequence[MessageSource],
        *,
        settings: PoolSettings,
        metrics: DeleterMetrics,
        outage: OutageGate | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """With `outage`, the receive loops take no message while a dependency is out."""
        retry_window = settings.retry_max_in_flight or settings.max_in_flight
        if min(settings.max_in_flight, retry_window) <= 0:
            raise ValueError("max_in_flight must be positive")
        self._handler = handler
        self._sources = list(sources)
        # The first source is the system topic; the others (the retry topic) get the retry window.
        self._windows = [settings.max_in_flight] + [retry_window] * (len(self._sources) - 1)
        self._settings = settings
        self._metrics = metrics
        self._outage = outage
        self._clock = clock
        self._tasks: dict[asyncio.Task[None], Tracker] = {}
        self._handling: dict[tuple[str, str], list[IncomingMessage]] = {}
        """(topic, message id) of every message being handled -> its later deliveries."""
        self._loops: list[asyncio.Task[None]] = []
        self._stopping = False

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until `stop` is set, then drain (also when cancelled meanwhile)."""
        self._loops = [
            asyncio.create_task(self._consume(source, window), name=f"consume:{source.topic}")
            for source, window in zip(self._sources, self._windows, strict=True)
        ]
        stop_wait = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait(
                [stop_wait, *self._loops], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is not stop_wait:
                    task.result()  # a loop that ended on its own crashed: surface it
        finally:
            stop_wait.cancel()
            drain = asyncio.create_task(self.drain())
            try:
                await asyncio.shield(drain)
            except asyncio.CancelledError:
                await drain  # bounded by drain_timeout; then the cancel goes on
                raise

    def status(self) -> PoolStatus:
        trackers = list(self._tasks.values())
        now_ms = int(self._clock() * 1000)
        published = [t.message.publish_time_ms or int(t.received_at * 1000) for t in trackers]
        return PoolStatus(
            in_process=len(trackers),
            holding=sum(1 for t in trackers if t.phase is Phase.HOLDING),
            oldest_pending_age_ms=max(0, now_ms - min(published)) if published else 0,
        )

    async def drain(self) -> None:
        """Stop receiving; give back held messages at once; let started work finish within
        the drain timeout, then cancel it. Unfinished work is never acknowledged."""
        if self._stopping:
            return
        self._stopping = True
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        for task, tracker in list(self._tasks.items()):
            if tracker.phase is Phase.HOLDING:
                task.cancel()
        pending = list(self._tasks)
        if pending:
            timeout = self._settings.drain_timeout.total_seconds()
            _, late = await asyncio.wait(pending, timeout=timeout)
            for task in late:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        _log.info("pool_drained", unfinished_released=len(pending))

    async def _consume(self, source: MessageSource, window: int) -> None:
        slots = asyncio.Semaphore(window)
        while not self._stopping:
            await slots.acquire()
            try:
                if self._outage is not None:
                    await self._outage.wait_open()  # no new work while a dependency is out
                message = await source.receive()
            except TombstoneError as exc:
                slots.release()
                _log.warning("receive_failed", topic=source.topic, error=str(exc))
                await asyncio.sleep(_RECEIVE_BACKOFF)
                continue
            except BaseException:
                slots.release()
                raise
            key = (source.topic, message.message_id)
            later = self._handling.get(key)
            if later is not None:
                # The broker redelivered a message this pool is still handling (a disconnect
                # redelivers everything the consumer held). Handling both would run two retry
                # chains for one PDLI and dead-letter it twice: the delivery waits for the
                # first one's outcome instead (`_settle_later`).
                later.append(message)
                slots.release()
                self._metrics.duplicate_deliveries.labels(source.topic).inc()
                continue
            self._handling[key] = []
            tracker = Tracker(message, received_at=self._clock())
            task = asyncio.create_task(self._process(source, tracker, key))
            self._tasks[task] = tracker
            self._metrics.in_flight.inc()
            task.add_done_callback(functools.partial(self._finished, slots=slots))

    def _finished(self, task: asyncio.Task[None], *, slots: asyncio.Semaphore) -> None:
        self._tasks.pop(task, None)
        slots.release()
        self._metrics.in_flight.dec()
        if not task.cancelled() and task.exception() is not None:
            _log.error("settle_failed", exc_info=task.exception())

    async def _process(self, source: MessageSource, tracker: Tracker, key: tuple[str, str]) -> None:
        message = tracker.message
        self._metrics.received.labels(source.topic).inc()
        try:
            try:
                settlement = await self._handler.decide(tracker)
            except Exception as exc:
                # A crash is released, so redeliveries count and the client's backstop
                # dead-letters a message that keeps crashing the handler.
                _log.exception("handler_failed", message_id=message.message_id)
                settlement = Settlement(Action.RELEASE, f"handler failed: {exc!r}")
            tracker.phase = Phase.SETTLING
            acknowledged = await self._handler.settle(source, message, settlement)
            await self._settle_later(source, key, acknowledged=acknowledged)
            self._metrics.settle_seconds.observe(max(0.0, self._clock() - tracker.received_at))
        finally:
            # No await between the last look at the later deliveries and this: one that
            # arrives from now on is handled as a message of its own.
            self._handling.pop(key, None)

    async def _settle_later(
        self, source: MessageSource, key: tuple[str, str], *, acknowledged: bool
    ) -> None:
        """Deliveries of the message that came while it was handled. Acknowledged: each is
        acknowledged too, since the first ack may have been lost with the connection that
        caused the redelivery (acks are by message id: one more is harmless). Released: the
        release already asks for a redelivery, which is handled afresh."""
        later = self._handling.get(key, [])
        while later:
            message = later.pop()
            if acknowledged:
                await self._handler.acknowledge(source, message)


__all__ = ["DeleterPool", "PoolSettings", "PoolStatus"]
