"""One lane per partition producer: rounds of messages with a single receipt callback each.

Why not one callback per message: the client runs each callback on its I/O thread and takes
the GIL for it, so every message costs two GIL hand-overs between that thread and the event
loop. Measured here, that caps one process near 30k messages/s, where the same client sends
about 160k/s when no callback is passed (`benchmarks/marker.py`).

So a lane hands the messages queued for its producer to the client back to back on the event
loop thread, passes a callback only with the last one (the tail), and asks the client to send
the batch now (`flush`, on a thread of the lane's own, because it blocks until the batch is
stored). The tail's receipt decides the round (`rounds.round_outcomes`). A lane has at most
one round in flight, so rounds of one producer never share a batch; what queues up meanwhile
forms the next round, which makes rounds grow with the load. Rounds are capped below the producer's
batch limits so that the client never cuts a batch by size.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import _pulsar
import pulsar
import structlog

from services.systopic.ports import OutgoingMessage, SendResult
from services.systopic.rounds import TailReceipt, round_outcomes

_log = structlog.get_logger(__name__)

_OK = pulsar.Result.Ok

Done = Callable[[list[SendResult]], None]


class _Job:
    """Messages of one `publish` chunk routed to this lane, and their results so far."""

    __slots__ = ("done", "messages", "remaining", "results", "taken")

    def __init__(self, messages: Sequence[OutgoingMessage], done: Done) -> None:
        self.messages = messages
        self.results: list[SendResult] = [SendResult(error="not sent")] * len(messages)
        self.remaining = len(messages)
        self.done = done
        self.taken = 0
        """How many messages rounds have taken so far."""


class _Round:
    __slots__ = ("count", "finished", "slices", "watchdog")

    def __init__(self, slices: list[tuple[_Job, int, int]], count: int) -> None:
        self.slices = slices
        self.count = count
        self.finished = False
        self.watchdog: asyncio.TimerHandle | None = None


class PartitionLane:
    """Sends to one producer in rounds; used on the event loop thread only (the tail
    callback comes back through `call_soon_threadsafe`)."""

    def __init__(
        self,
        producer: pulsar.Producer,
        *,
        max_messages: int,
        max_bytes: int,
        receipt_timeout: float,
    ) -> None:
        self._producer = producer
        self._native = producer._producer  # the C++ producer behind the Python wrapper
        # A plain thread fed by a SimpleQueue: the least GIL traffic per flush (an executor
        # adds futures and Python-level locking to every round).
        self._flush_requests: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._flusher = threading.Thread(
            target=self._flush_loop, name=f"systopic-flush-{producer.topic()}", daemon=True
        )
        self._flusher.start()
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._receipt_timeout = receipt_timeout
        self._queue: deque[_Job] = deque()
        self._in_flight: _Round | None = None
        self._kick_scheduled = False
        self._loop = asyncio.get_running_loop()

    def submit(self, messages: Sequence[OutgoingMessage], done: Done) -> None:
        """Queue `messages`; `done(results)` is called on the loop once all have an outcome."""
        if not messages:
            done([])
            return
        self._queue.append(_Job(messages, done))
        if self._in_flight is None and not self._kick_scheduled:
            # Start on the next loop turn, so that everything submitted in this one (e.g. by
            # calls whose reads completed together) goes out as one round.
            self._kick_scheduled = True
            self._loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kick_scheduled = False
        if self._in_flight is None:
            self._start_round()

    def _start_round(self) -> None:
        while self._in_flight is None:
            round_ = self._take_round()
            if round_ is None:
                return
            self._in_flight = round_
            error = self._hand_over(round_)
            # Send the batch now; if the producer is reconnecting the flush fails and the
            # client's batch timer sends it once it is back.
            self._flush_requests.put(True)
            if error is None:
                round_.watchdog = self._loop.call_later(self._receipt_timeout, self._expire, round_)
                return
            self._finish(round_, TailReceipt(error=error), start_next=False)

    def _take_round(self) -> _Round | None:
        slices: list[tuple[_Job, int, int]] = []
        count = size = 0
        while self._queue and count < self._max_messages:
            job = self._queue[0]
            start = end = job.taken
            while end < len(job.messages) and count < self._max_messages:
                weight = len(job.messages[end].payload) + 64
                if count and size + weight > self._max_bytes:
                    break
                size += weight
                count += 1
                end += 1
            if end > start:
                slices.append((job, start, end))
                job.taken = end
            if end < len(job.messages):
                break  # the round is full
            self._queue.popleft()
        return _Round(slices, count) if count else None

    def _hand_over(self, round_: _Round) -> str | None:
        """Hand the round to the client; an error means the tail was never handed over."""
        send = self._native.send_async
        builder = _pulsar.MessageBuilder
        left = round_.count
        tail = self._tail_callback(round_)
        try:
            for job, start, end in round_.slices:
                messages = job.messages
                for index in range(start, end):
                    payload, key, properties = messages[index]
                    message = builder().content(payload).partition_key(key)
                    left -= 1
                    send(message.properties(properties).build(), tail if left == 0 else None)
        except Exception as exc:  # nothing after this is sent, and no tail receipt will come
            return f"send refused: {exc}"
        return None

    def _tail_callback(self, round_: _Round) -> Callable[[Any, Any], None]:
        loop = self._loop

        def tail(result: Any, message_id: Any) -> None:
            # Runs on the client's I/O thread (or inside send_async for an immediate refusal).
            # It must never raise: an exception there aborts the process.
            try:
                receipt = _receipt(result, message_id)
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                    loop.call_soon_threadsafe(self._finish, round_, receipt)
            except BaseException:
                _log.exception("tail_receipt_failed")

        return tail

    def _flush_loop(self) -> None:
        flush = self._native.flush
        while self._flush_requests.get():
            try:
                flush()
            except Exception as exc:  # the tail's receipt carries the outcome that matters
                _log.debug("producer_flush_failed", topic=self._producer.topic(), error=str(exc))

    async def close(self) -> None:
        """Stop the flush thread (after the publisher let every round finish)."""
        self._flush_requests.put(False)
        await asyncio.to_thread(self._flusher.join)

    def _expire(self, round_: _Round) -> None:
        seconds = self._receipt_timeout
        self._finish(round_, TailReceipt(error=f"no receipt within {seconds:g} s"))

    def _finish(self, round_: _Round, receipt: TailReceipt, *, start_next: bool = True) -> None:
        if round_.finished:
            return  # the watchdog already decided it (a late receipt changes nothing)
        round_.finished = True
        if round_.watchdog is not None:
            round_.watchdog.cancel()
        outcomes = round_outcomes(round_.count, receipt)
        position = 0
        for job, start, end in round_.slices:
            job.results[start:end] = outcomes[position : position + end - start]
            position += end - start
            job.remaining -= end - start
            if job.remaining == 0:
                job.done(job.results)
        if self._in_flight is round_:
            self._in_flight = None
            if start_next:
                self._start_round()


def _receipt(result: Any, message_id: Any) -> TailReceipt:
    if result != _OK:
        return TailReceipt(error=f"send failed: {result}")
    return TailReceipt(
        ledger_id=message_id.ledger_id(),
        entry_id=message_id.entry_id(),
        partition=message_id.partition(),
        batch_index=message_id.batch_index(),
    )
