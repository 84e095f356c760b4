"""The Pulsar adapter of `IntentPublisher`: the only systopic module that imports `pulsar`.

Why the synchronous client's `send_async` rather than `pulsar.asyncio.Producer.send`: both wrap
the same C++ producer, but the asyncio wrapper resolves one future per message through
`call_soon_threadsafe`, i.e. one event-loop wake-up per message. Here the receipts of one
`publish` call are collected in the client's I/O thread and the loop is woken once per call.
`benchmarks/marker.py` measures both (see docs/marker.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import _pulsar
import pulsar
import structlog

from services.core.config import PulsarConfig
from services.core.errors import FailedPrecondition, Unavailable
from services.systopic.ports import OutgoingMessage, ProducerSettings, SendResult
from services.systopic.window import InflightWindow

_log = structlog.get_logger(__name__)


class _Receipts:
    """The receipts of one chunk, filled by the client's I/O thread; wakes the loop once.

    The callback only stores what the client hands over and counts down: formatting waits
    until the loop has the whole chunk, so the I/O thread (which holds the GIL while it runs
    Python) gets back to the network quickly.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.outcomes: list[tuple[Any, Any] | str | None] = [None] * count
        self.future: asyncio.Future[None] = loop.create_future()
        self._loop = loop
        self._remaining = count
        self._lock = threading.Lock()

    def done(self, index: int, result: Any, message_id: Any) -> None:
        """Client callback. It must never raise: an exception there aborts the process."""
        try:
            self.outcomes[index] = (result, message_id)
            self._count_down(1)
        except BaseException:  # see the docstring: never let it reach the client
            _log.exception("receipt_callback_failed")

    def fail_from(self, index: int, reason: str) -> None:
        """Messages `index..` were never handed to the client."""
        for i in range(index, len(self.outcomes)):
            self.outcomes[i] = reason
        self._count_down(len(self.outcomes) - index)

    def _count_down(self, count: int) -> None:
        with self._lock:
            self._remaining -= count
            finished = self._remaining == 0
        if finished:
            # A closed loop means nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    def results(self) -> list[SendResult]:
        return [_result(outcome) for outcome in self.outcomes]


_MS = timedelta(milliseconds=1)
_OK = pulsar.Result.Ok


def _result(outcome: tuple[Any, Any] | str | None) -> SendResult:
    if isinstance(outcome, tuple):
        result, message_id = outcome
        if result == _OK:
            return SendResult(message_id=str(message_id))
        return SendResult(error=f"send failed: {result}")
    return SendResult(error=outcome or "no receipt")


class PulsarIntentPublisher:
    """`IntentPublisher` over one (partitioned) `pulsar.Producer` with batching on."""

    def __init__(self, producer: pulsar.Producer, window: InflightWindow) -> None:
        self._producer = producer
        self._native = producer._producer  # the C++ producer behind the Python wrapper
        self._window = window
        self._closed = False

    @property
    def producer_name(self) -> str:
        return str(self._producer.producer_name())

    @property
    def in_flight(self) -> int:
        return self._window.in_flight

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        results: list[SendResult] = []
        step = self._window.capacity
        for start in range(0, len(messages), step):
            results += await self._publish_chunk(messages[start : start + step])
        return results

    async def _publish_chunk(self, chunk: Sequence[OutgoingMessage]) -> list[SendResult]:
        if not chunk:
            return []
        await self._window.acquire(len(chunk))
        receipts = _Receipts(asyncio.get_running_loop(), len(chunk))
        # Slots come back when the client has answered for every message, even if the caller
        # was cancelled meanwhile: the messages are still in the client's queue until then.
        receipts.future.add_done_callback(lambda _: self._window.release(len(chunk)))
        self._hand_over(chunk, receipts)
        await asyncio.shield(receipts.future)
        return receipts.results()

    def _hand_over(self, chunk: Sequence[OutgoingMessage], receipts: _Receipts) -> None:
        # The hot path: build messages with the client's own builder and hand them to the C++
        # producer directly, skipping the per-call argument checks of `Producer.send_async`
        # (our messages are well-typed by construction).
        send = self._native.send_async
        done = receipts.done
        for index, message in enumerate(chunk):
            if self._closed:
                receipts.fail_from(index, "publisher closed")
                return
            builder = _pulsar.MessageBuilder()
            builder.content(message.payload)
            builder.partition_key(message.partition_key)
            for key, value in message.properties.items():
                builder.property(key, value)
            try:
                send(builder.build(), functools.partial(done, index))
            except Exception as exc:  # any refusal fails the rest of the chunk
                receipts.fail_from(index, f"send refused: {exc}")
                return

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.to_thread(self._producer.flush)
        except Exception:  # closing anyway; pending sends report their own errors
            _log.warning("producer_flush_failed", exc_info=True)
        await asyncio.to_thread(self._producer.close)


def _client(config: PulsarConfig) -> pulsar.Client:
    auth = pulsar.AuthenticationToken(config.auth_token) if config.auth_token else None
    return pulsar.Client(
        config.service_url,
        authentication=auth,
        operation_timeout_seconds=max(1, int(config.operation_timeout.total_seconds())),
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
    )


def _check_partitions(client: pulsar.Client, topic: str, expected: int) -> None:
    """Refuse to start against a topic whose partition count is not the configured one."""
    try:
        names = client.get_topic_partitions(topic)
    except pulsar.PulsarException as exc:
        raise Unavailable(f"cannot read the partitions of {topic}: {exc}") from exc
    found = len(names) if len(names) > 1 or names != [topic] else 0
    if found != expected:
        raise FailedPrecondition(
            f"{topic} has {found} partitions but {expected} are configured "
            "(create the partitioned topic first, or fix TOMBSTONE_PULSAR_TOPIC_PARTITIONS)"
        )


def _create_producer(
    client: pulsar.Client, topic: str, settings: ProducerSettings, partitions: int
) -> pulsar.Producer:
    window = settings.max_in_flight
    try:
        return client.create_producer(
            topic,
            producer_name=settings.producer_name,
            batching_enabled=True,
            batching_max_messages=settings.batching_max_messages,
            batching_max_publish_delay_ms=max(1, settings.batching_delay // _MS),
            # Our window bounds what is queued in all. The client divides its across-partitions
            # limit by the partition count, so that limit is window × partitions: however
            # unevenly the keys spread, no partition queue fills and send_async never blocks
            # the event loop nor fails with "queue full".
            max_pending_messages=window,
            max_pending_messages_across_partitions=window * max(1, partitions),
            block_if_queue_full=False,
            send_timeout_millis=int(settings.send_timeout.total_seconds() * 1000),
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
    except pulsar.PulsarException as exc:
        name = settings.producer_name
        raise Unavailable(f"cannot create producer {name} on {topic}: {exc}") from exc


@asynccontextmanager
async def open_intent_publisher(
    config: PulsarConfig, settings: ProducerSettings, *, topic: str | None = None
) -> AsyncIterator[PulsarIntentPublisher]:
    """A publisher on `topic` (default: the system topic), closed on exit."""
    target = topic or config.topic
    client = await asyncio.to_thread(_client, config)
    try:
        await asyncio.to_thread(_check_partitions, client, target, config.partitions)
        producer = await asyncio.to_thread(
            _create_producer, client, target, settings, config.partitions
        )
        publisher = PulsarIntentPublisher(producer, InflightWindow(settings.max_in_flight))
        _log.info("producer_ready", topic=target, producer=publisher.producer_name)
        try:
            yield publisher
        finally:
            await publisher.close()
    finally:
        await asyncio.to_thread(client.close)
