"""The consumer adapter against the devstack broker with the real pulsar-client."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from services.core.config import PulsarConfig
from services.systopic._consumer import ConsumerSettings, SubscriptionType, open_message_source
from services.systopic._pulsar import open_intent_publisher
from services.systopic.dead_letter import CLIENT_ORIGIN_PROPERTY
from services.systopic.ports import OutgoingMessage, ProducerSettings

TOPIC = "persistent://pulsar/system/consumer-test"
DLQ = f"{TOPIC}-DLQ"


def config(broker: PulsarBrokerProcess) -> PulsarConfig:
    return PulsarConfig(
        service_url=broker.service_url, partitions=0, operation_timeout=timedelta(seconds=5)
    )


async def publish(broker: PulsarBrokerProcess, topic: str, *payloads: bytes) -> None:
    settings = ProducerSettings(producer_name=f"test-{topic[-8:]}")
    async with open_intent_publisher(config(broker), settings, topic=topic) as publisher:
        results = await publisher.publish([OutgoingMessage(p, "k", {"a": "b"}) for p in payloads])
    assert [True] * len(payloads) == [r.ok for r in results]


async def receive(source: object, timeout: float = 10.0) -> object:
    return await asyncio.wait_for(source.receive(), timeout)  # type: ignore[attr-defined]


async def test_receive_then_acknowledge_empties_the_backlog(broker: PulsarBrokerProcess) -> None:
    """A received message carries payload and properties; after its ack the backlog is 0."""
    settings = ConsumerSettings(subscription="sub")
    async with open_message_source(config(broker), TOPIC, settings) as source:
        await publish(broker, TOPIC, b"one")
        message = await source.receive()
        await source.acknowledge(message)
        assert (message.payload, message.properties["a"]) == (b"one", "b")

        async def empty() -> int:
            return await asyncio.to_thread(broker.control.backlog, TOPIC, "sub")

        for _ in range(100):
            if await empty() == 0:
                break
            await asyncio.sleep(0.05)
        assert await empty() == 0


async def test_released_message_comes_back_with_a_higher_count(
    broker: PulsarBrokerProcess,
) -> None:
    """A release redelivers the message after the release delay, counted."""
    settings = ConsumerSettings(subscription="sub", negative_ack_delay=timedelta(milliseconds=100))
    async with open_message_source(config(broker), TOPIC, settings) as source:
        await publish(broker, TOPIC, b"again")
        first = await source.receive()
        await source.release(first)
        second = await receive(source)
    assert (second.payload, first.redelivery_count, second.redelivery_count) == (b"again", 0, 1)  # type: ignore[attr-defined]


async def test_client_backstop_moves_a_repeatedly_released_message_to_our_dlq(
    broker: PulsarBrokerProcess,
) -> None:
    """After max_redeliveries releases the client publishes it to the configured DLQ topic,
    where the dead-letter subscription (created first) holds it."""
    scan = ConsumerSettings(subscription="dlq-sub", subscription_type=SubscriptionType.EXCLUSIVE)
    async with open_message_source(config(broker), DLQ, scan):
        pass
    settings = ConsumerSettings(
        subscription="sub",
        negative_ack_delay=timedelta(milliseconds=100),
        dead_letter_topic=DLQ,
        max_redeliveries=2,
        dead_letter_subscription="dlq-sub",
    )
    async with open_message_source(config(broker), TOPIC, settings) as source:
        await publish(broker, TOPIC, b"crashes")
        for _ in range(3):
            await source.release(await receive(source))  # type: ignore[arg-type]
        async with open_message_source(config(broker), DLQ, scan) as dlq:
            letter = await receive(dlq)
    assert letter.payload == b"crashes"  # type: ignore[attr-defined]
    assert CLIENT_ORIGIN_PROPERTY in letter.properties  # type: ignore[attr-defined]


async def test_unacknowledged_messages_return_to_the_next_exclusive_scan(
    broker: PulsarBrokerProcess,
) -> None:
    """A scan that closes without acking leaves the messages for the next scan."""
    scan = ConsumerSettings(subscription="dlq-sub", subscription_type=SubscriptionType.EXCLUSIVE)
    async with open_message_source(config(broker), DLQ, scan):
        pass
    await publish(broker, DLQ, b"a", b"b")
    async with open_message_source(config(broker), DLQ, scan) as first:
        seen = [(await receive(first)).payload for _ in range(2)]  # type: ignore[attr-defined]
    async with open_message_source(config(broker), DLQ, scan) as second:
        again = [(await receive(second)).payload for _ in range(2)]  # type: ignore[attr-defined]
    assert (seen, again) == ([b"a", b"b"], [b"a", b"b"])
