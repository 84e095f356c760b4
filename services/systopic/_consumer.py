"""The Pulsar adapter of `MessageSource`: the only consumer-side module that imports `pulsar`.

It uses `pulsar.asyncio`: `receive()` takes one message from the client's receive queue, whose
size (`receiver_queue_size`) bounds what the client prefetches, so a backlog of any size
costs the same memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import _pulsar
import pulsar
import pulsar.asyncio as pulsar_asyncio
import structlog

from services.core.config import PulsarConfig
from services.core.errors import Conflict, Unavailable
from services.systopic._client_options import client_options, refusal_hint
from services.systopic.consumer import IncomingMessage

_log = structlog.get_logger(__name__)


class SubscriptionType(enum.Enum):
    SHARED = "shared"
    """Many consumers split the messages (the deleter pool)."""
    EXCLUSIVE = "exclusive"
    """One consumer at a time (administrative scans of the dead-letter topic)."""


@dataclass(frozen=True)
class ConsumerSettings:
    """How one subscription is opened."""

    subscription: str
    """The subscription name; every deleter of a pool uses the same one."""
    subscription_type: SubscriptionType = SubscriptionType.SHARED
    receiver_queue_size: int = 1000
    """Messages the client prefetches; bounds the memory a backlog can take."""
    negative_ack_delay: timedelta = timedelta(seconds=60)
    """How long a released message waits before it is redelivered."""
    dead_letter_topic: str | None = None
    """Where the client's backstop moves a message after `max_redeliveries`."""
    max_redeliveries: int = 5
    """Deliveries of one message before the client's backstop dead-letters it."""
    dead_letter_subscription: str | None = None
    """Created on the dead-letter topic with its producer, so nothing is dropped unread."""
    consumer_name: str | None = None


def _format_id(message_id: Any) -> str:
    return (
        f"{message_id.ledger_id()}:{message_id.entry_id()}:"
        f"{message_id.partition()}:{message_id.batch_index()}"
    )


class PulsarMessageSource:
    """`MessageSource` over one `pulsar.asyncio.Consumer`."""

    def __init__(self, consumer: pulsar_asyncio.Consumer, topic: str) -> None:
        self._consumer = consumer
        self._native: _pulsar.Consumer = consumer._consumer  # the C++ consumer behind it
        self._topic = topic
        self._closed = False

    @property
    def topic(self) -> str:
        return self._topic

    async def receive(self) -> IncomingMessage:
        # A message the client already holds (it prefetches up to its receiver queue) is
        # taken at once with the client's own call, which returns without blocking when its
        # queue is empty; only then does the loop wait, through `pulsar.asyncio`. Under a
        # backlog that spares each message a future and a wake-up of the loop from the
        # client's thread.
        try:
            native = self._native.receive(0)
        except _pulsar.Timeout:
            native = await self._wait()
        except _pulsar.PulsarException as exc:
            raise Unavailable(f"receive on {self._topic} failed: {exc}") from exc
        return IncomingMessage(
            payload=native.data(),
            properties=native.properties(),
            message_id=_format_id(native.message_id()),
            topic=native.topic_name(),
            redelivery_count=native.redelivery_count(),
            publish_time_ms=native.publish_timestamp(),
            handle=native,
        )

    async def _wait(self) -> _pulsar.Message:
        try:
            message = await self._consumer.receive()
        except pulsar_asyncio.PulsarException as exc:
            raise Unavailable(f"receive on {self._topic} failed: {exc}") from exc
        native: _pulsar.Message = message._message
        return native

    async def acknowledge(self, message: IncomingMessage) -> None:
        # The client's own call, not `pulsar.asyncio`'s: acks are grouped (the client sends
        # them together every `ackGroupingTimeMs`, 100 ms by default) and a grouped ack is
        # done once recorded, before the call returns. The asyncio wrapper still made a
        # future and a wake-up of the loop from another thread for each message, the largest
        # per-message cost of settling in the deleter's profile.
        try:
            self._native.acknowledge(message.handle)
        except _pulsar.PulsarException as exc:
            # Unknown outcome: the message may come again, which the deleter tolerates.
            raise Unavailable(f"acknowledge {message.message_id} failed: {exc}") from exc

    async def release(self, message: IncomingMessage) -> None:
        # Only records the id for the client's redelivery timer (nothing is sent yet).
        with contextlib.suppress(pulsar_asyncio.PulsarException):
            await self._consumer.negative_acknowledge(message.handle)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(pulsar_asyncio.PulsarException):
            await self._consumer.close()


def _client(config: PulsarConfig) -> pulsar_asyncio.Client:
    return pulsar_asyncio.Client(config.service_url, **client_options(config))


def _subscribe_kwargs(settings: ConsumerSettings) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "consumer_type": (
            pulsar.ConsumerType.Shared
            if settings.subscription_type is SubscriptionType.SHARED
            else pulsar.ConsumerType.Exclusive
        ),
        "receiver_queue_size": settings.receiver_queue_size,
        "max_total_receiver_queue_size_across_partitions": settings.receiver_queue_size,
        "initial_position": pulsar.InitialPosition.Earliest,
        "negative_ack_redelivery_delay_ms": max(100, int(settings.negative_ack_delay / _MS)),
    }
    if settings.consumer_name:
        kwargs["consumer_name"] = settings.consumer_name
    if settings.dead_letter_topic:
        kwargs["dead_letter_policy"] = pulsar.ConsumerDeadLetterPolicy(
            settings.max_redeliveries,
            settings.dead_letter_topic,
            settings.dead_letter_subscription,
        )
    return kwargs


_MS = timedelta(milliseconds=1)


@asynccontextmanager
async def open_message_source(
    config: PulsarConfig, topic: str, settings: ConsumerSettings
) -> AsyncIterator[PulsarMessageSource]:
    """A subscription on `topic`, closed on exit (its unacknowledged messages go back)."""
    client = _client(config)
    try:
        try:
            consumer = await client.subscribe(
                topic, settings.subscription, **_subscribe_kwargs(settings)
            )
        except pulsar_asyncio.PulsarException as exc:
            if exc.error() == pulsar.Result.ConsumerBusy:
                raise Conflict(f"subscription {settings.subscription} on {topic} is busy") from exc
            hint = refusal_hint(config)
            raise Unavailable(f"cannot subscribe to {topic}: {exc}{hint}") from exc
        source = PulsarMessageSource(consumer, topic)
        _log.info("consumer_ready", topic=topic, subscription=settings.subscription)
        try:
            yield source
        finally:
            await source.close()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.close(), config.operation_timeout.total_seconds())
