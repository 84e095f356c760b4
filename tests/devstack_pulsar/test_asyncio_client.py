"""The `pulsar.asyncio` client against the devstack broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pulsar
import pulsar.asyncio
import pytest

from devstack.pulsar import PulsarBrokerProcess

from .conftest import ClientLog


@pytest.fixture
async def aclient(
    broker: PulsarBrokerProcess, client_log: ClientLog
) -> AsyncIterator[pulsar.asyncio.Client]:
    client = pulsar.asyncio.Client(
        broker.service_url, logger=client_log.logger, operation_timeout_seconds=15
    )
    yield client
    await client.close()


async def test_batched_produce_and_consume(aclient: pulsar.asyncio.Client, topic: str) -> None:
    """The asyncio producer batches by default; every message arrives in order."""
    consumer = await aclient.subscribe(topic, "sub")
    producer = await aclient.create_producer(topic)
    ids = await asyncio.gather(*(producer.send(f"m{i}".encode()) for i in range(50)))
    received = [await asyncio.wait_for(consumer.receive(), 10) for _ in range(50)]
    for message in received:
        await consumer.acknowledge(message)
    assert [f"m{i}".encode() for i in range(50)] == [m.data() for m in received]
    assert [str(i) for i in ids] == [str(m.message_id()) for m in received]


async def test_negative_ack_and_dead_letter(aclient: pulsar.asyncio.Client, topic: str) -> None:
    """Negative acks redeliver with counts, then the dead-letter policy moves the message."""
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=1)
    consumer = await aclient.subscribe(
        topic,
        "sub",
        consumer_type=pulsar.ConsumerType.Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=policy,
    )
    dlq = await aclient.subscribe(
        f"{topic}-sub-DLQ", "reader", initial_position=pulsar.InitialPosition.Earliest
    )
    producer = await aclient.create_producer(topic, batching_enabled=False)
    await producer.send(b"poison")
    counts = []
    for _ in range(2):
        message = await asyncio.wait_for(consumer.receive(), 10)
        counts.append(message.redelivery_count())
        await consumer.negative_acknowledge(message)
    dead = await asyncio.wait_for(dlq.receive(), 10)
    assert ([0, 1], b"poison", topic) == (counts, dead.data(), dead.properties()["REAL_TOPIC"])


async def test_get_last_message_id_and_seek(aclient: pulsar.asyncio.Client, topic: str) -> None:
    """get_last_message_id names the last entry; a seek replays what follows the id."""
    consumer = await aclient.subscribe(topic, "sub")
    producer = await aclient.create_producer(topic, batching_enabled=False)
    ids = [await producer.send(f"m{i}".encode()) for i in range(3)]
    last = await consumer.get_last_message_id()
    assert last.entry_id() == 2
    for _ in range(3):
        await consumer.acknowledge(await asyncio.wait_for(consumer.receive(), 10))
    await consumer.seek(ids[0])
    assert (await asyncio.wait_for(consumer.receive(), 10)).data() == b"m1"
