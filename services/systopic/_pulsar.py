"""The Pulsar adapter of `IntentPublisher`: with `_lanes.py`, the only systopic code that
imports `pulsar`.

One producer per partition of the topic (the partitions of a partitioned topic are topics of
their own; the broker deduplicates per partition by the stable producer name, as it does for
the client's partitioned producer). We route each message ourselves, by a hash of its
partition key, so that a lane knows exactly which messages share its producer: that is what
lets one receipt per round stand for every message of the round (`_lanes.py`, `rounds.py`).
Both tiers of a ledger have the same key, so they land on one partition.
"""

from __future__ import annotations

import asyncio
import functools
import zlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta

import pulsar
import structlog

from services.core.config import PulsarConfig
from services.core.errors import StartupRefused, Unavailable
from services.systopic._client_options import client_options, refusal_hint
from services.systopic._lanes import PartitionLane
from services.systopic.ports import OutgoingMessage, ProducerSettings, SendResult
from services.systopic.window import InflightWindow

_log = structlog.get_logger(__name__)

ROUND_MAX_BYTES = 1 << 20
"""A round's payloads stay under this, half the producer's batch size limit, so the client
never cuts a round's batch by size."""
_BATCH_MAX_BYTES = 2 * ROUND_MAX_BYTES
_CLIENT_QUEUE_LIMIT = 1 << 30
_BATCH_BACKSTOP = timedelta(seconds=1)
"""The client's batch timer. Lanes flush every round; the timer only sends a round whose
flush found the producer reconnecting. It must exceed the time to hand over one round."""


def partition_of(partition_key: str, partitions: int) -> int:
    """The partition of a key: stable across processes and releases (CRC-32 of the key)."""
    return zlib.crc32(partition_key.encode()) % partitions if partitions > 1 else 0


class _Chunk:
    """Results of one window-sized chunk, filled lane by lane on the loop thread."""

    def __init__(self, count: int) -> None:
        self.results: list[SendResult] = [SendResult(error="not sent")] * count
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._parts = 0

    def expect(self, parts: int) -> None:
        self._parts = parts
        if parts == 0:
            self.future.set_result(None)

    def fill(self, indexes: list[int], results: list[SendResult]) -> None:
        for index, result in zip(indexes, results, strict=True):
            self.results[index] = result
        self._parts -= 1
        if self._parts == 0 and not self.future.done():
            self.future.set_result(None)


class PulsarIntentPublisher:
    """`IntentPublisher` over one producer per partition, sending in rounds."""

    def __init__(
        self,
        producers: Sequence[pulsar.Producer],
        window: InflightWindow,
        *,
        max_round: int,
        receipt_timeout: timedelta,
    ) -> None:
        self._producers = list(producers)
        self._window = window
        self._lanes = [
            PartitionLane(
                producer,
                max_messages=max_round,
                max_bytes=ROUND_MAX_BYTES,
                receipt_timeout=receipt_timeout.total_seconds(),
            )
            for producer in producers
        ]
        self._pending: set[asyncio.Future[None]] = set()
        self._closed = False

    @property
    def producer_name(self) -> str:
        return str(self._producers[0].producer_name())

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
        pending = _Chunk(len(chunk))
        # Slots come back when the client has answered for every message, even if the caller
        # was cancelled meanwhile: the messages are still in the client's queue until then.
        pending.future.add_done_callback(lambda _: self._window.release(len(chunk)))
        self._pending.add(pending.future)
        pending.future.add_done_callback(self._pending.discard)
        if self._closed:
            pending.results = [SendResult(error="publisher closed")] * len(chunk)
            pending.expect(0)
        else:
            self._route(chunk, pending)
        await asyncio.shield(pending.future)
        return pending.results

    def _route(self, chunk: Sequence[OutgoingMessage], pending: _Chunk) -> None:
        lanes = len(self._lanes)
        parts: dict[int, tuple[list[int], list[OutgoingMessage]]] = {}
        for index, message in enumerate(chunk):
            lane = partition_of(message.partition_key, lanes)
            indexes, messages = parts.setdefault(lane, ([], []))
            indexes.append(index)
            messages.append(message)
        pending.expect(len(parts))
        for lane, (indexes, messages) in parts.items():
            self._lanes[lane].submit(messages, functools.partial(pending.fill, indexes))

    async def close(self) -> None:
        """Let every queued round finish, then flush and close the producers."""
        if self._closed:
            return
        self._closed = True
        if self._pending:
            await asyncio.wait(set(self._pending))
        for lane in self._lanes:
            await lane.close()
        for producer in self._producers:
            try:
                await asyncio.to_thread(producer.flush)
            except Exception:  # closing anyway; pending sends reported their own errors
                _log.warning("producer_flush_failed", topic=producer.topic(), exc_info=True)
            await asyncio.to_thread(producer.close)


def _client(config: PulsarConfig) -> pulsar.Client:
    return pulsar.Client(config.service_url, **client_options(config))


def _partition_topics(
    client: pulsar.Client, config: PulsarConfig, topic: str, expected: int
) -> list[str]:
    """The topics to produce to (the partitions, or the topic itself); refuses to start
    (`StartupRefused`, exit 2) against a topic whose partition count is not the configured
    one: the producers would route by a count the consumers do not have, or publish to a
    topic nobody made ready (an absent topic reads as 0 partitions)."""
    try:
        names = list(client.get_topic_partitions(topic))
    except pulsar.PulsarException as exc:
        hint = refusal_hint(config)
        raise Unavailable(f"cannot read the partitions of {topic}: {exc}{hint}") from exc
    found = len(names) if len(names) > 1 or names != [topic] else 0
    if found != expected:
        raise StartupRefused(
            f"{topic} has {found} partitions but TOMBSTONE_PULSAR_TOPIC_PARTITIONS is "
            f"{expected} (run `tombstone setup`, or fix the setting)"
        )
    return names


def _create_producer(
    client: pulsar.Client, topic: str, settings: ProducerSettings
) -> pulsar.Producer:
    try:
        return client.create_producer(
            topic,
            producer_name=settings.producer_name,
            batching_enabled=True,
            # Rounds decide the batches: the limits sit above any round.
            batching_max_messages=settings.max_round + 1,
            batching_max_allowed_size_in_bytes=_BATCH_MAX_BYTES,
            batching_max_publish_delay_ms=int(_BATCH_BACKSTOP.total_seconds() * 1000),
            # A lane counts on the client never refusing one message of a round on its own,
            # and "queue full" is such a refusal; our window bounds what we queue, so the
            # client's limit only has to sit above it, also counting rounds a lane gave up on
            # (no receipt in time) that the client still holds until its send timeout.
            max_pending_messages=_CLIENT_QUEUE_LIMIT,
            block_if_queue_full=False,
            send_timeout_millis=int(settings.send_timeout.total_seconds() * 1000),
        )
    except pulsar.PulsarException as exc:
        name = settings.producer_name
        raise Unavailable(f"cannot create producer {name} on {topic}: {exc}") from exc


def _receipt_timeout(settings: ProducerSettings) -> timedelta:
    """The client fails a message at its send timeout; past this, a lane stops waiting."""
    return settings.send_timeout + _BATCH_BACKSTOP + timedelta(seconds=10)


@asynccontextmanager
async def open_intent_publisher(
    config: PulsarConfig, settings: ProducerSettings, *, topic: str | None = None
) -> AsyncIterator[PulsarIntentPublisher]:
    """A publisher on `topic` (default: the system topic), closed on exit."""
    target = topic or config.topic
    client = await asyncio.to_thread(_client, config)
    try:
        names = await asyncio.to_thread(
            _partition_topics, client, config, target, config.partitions
        )
        producers = [
            await asyncio.to_thread(_create_producer, client, name, settings) for name in names
        ]
        publisher = PulsarIntentPublisher(
            producers,
            InflightWindow(settings.max_in_flight),
            max_round=settings.max_round,
            receipt_timeout=_receipt_timeout(settings),
        )
        _log.info("producer_ready", topic=target, producer=publisher.producer_name)
        try:
            yield publisher
        finally:
            await publisher.close()
    finally:
        await asyncio.to_thread(client.close)
