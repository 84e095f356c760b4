"""Partitioned topics and PIP-6 deduplication by producer name."""

from __future__ import annotations

import threading

import pulsar

from devstack.pulsar import PulsarBrokerProcess

from .conftest import assert_nothing_more, receive_all

EARLIEST = pulsar.InitialPosition.Earliest


def test_partitioned_topic_spreads_and_delivers_everything(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """Messages to a 3-partition topic land on several partitions and all reach the consumer."""
    broker.control.create_partitioned_topic(topic, 3)
    assert len(client.get_topic_partitions(topic)) == 3
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    sent = {}
    for i in range(30):
        sent[f"m{i}".encode()] = str(producer.send(f"m{i}".encode(), partition_key=f"k{i}"))
    received = receive_all(consumer, 30)
    assert sent == {m.data(): str(m.message_id()) for m in received}
    partitions = {m.message_id().partition() for m in received}
    assert len(partitions) > 1
    assert all(
        m.topic_name() == f"{topic}-partition-{m.message_id().partition()}" for m in received
    )


def test_dedup_drops_a_resent_sequence_id(client: pulsar.Client, topic: str) -> None:
    """A new producer with the same name resumes after the last stored sequence id, and a
    resent id is acknowledged without being stored again."""
    consumer = client.subscribe(topic, "sub")
    first = client.create_producer(topic, producer_name="dedup")
    for i in range(3):
        first.send(f"m{i}".encode())
    first.close()
    second = client.create_producer(topic, producer_name="dedup")
    assert second.last_sequence_id() == 2
    duplicate = second.send(b"m1-again", sequence_id=1)
    second.send(b"m3")
    assert (duplicate.ledger_id(), duplicate.entry_id()) == (-1, -1)
    assert [m.data() for m in receive_all(consumer, 4)] == [b"m0", b"m1", b"m2", b"m3"]
    assert_nothing_more(consumer)


def test_dropped_connections_lose_and_duplicate_nothing(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """Sends in flight when every connection drops are resent by the client and stored once."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="flaky", batching_enabled=True)
    done = threading.Event()
    results: list[object] = []

    def on_sent(result: object, _id: object) -> None:
        results.append(result)
        if len(results) == 400:
            done.set()

    for i in range(400):
        producer.send_async(f"m{i}".encode(), on_sent)
        if i == 200:
            broker.control.drop_connections()
    assert done.wait(30)
    assert [pulsar.Result.Ok] * 400 == results
    received = receive_all(consumer, 400)
    assert [f"m{i}".encode() for i in range(400)] == [m.data() for m in received]
    assert_nothing_more(consumer)


def test_dedup_can_be_turned_off_per_namespace(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """With deduplication off, a resent sequence id is stored again and names are not tracked."""
    broker.control.set_deduplication("public/default", False)
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="plain")
    producer.send(b"a", sequence_id=5)
    producer.send(b"b", sequence_id=5)
    producer.close()
    assert client.create_producer(topic, producer_name="plain").last_sequence_id() == -1
    assert [m.data() for m in receive_all(consumer, 2)] == [b"a", b"b"]
