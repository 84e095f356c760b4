"""Producing and consuming through the devstack broker with the real sync client."""

from __future__ import annotations

import pulsar
import pytest

from devstack.pulsar import PulsarBrokerProcess

from .conftest import assert_nothing_more, receive_all

EARLIEST = pulsar.InitialPosition.Earliest


def test_messages_arrive_in_order_with_the_send_ids(client: pulsar.Client, topic: str) -> None:
    """Non-batched sends come back in order, with the ids the producer was given."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    sent = [producer.send(f"m{i}".encode()) for i in range(20)]
    received = receive_all(consumer, 20)
    assert [f"m{i}".encode() for i in range(20)] == [m.data() for m in received]
    assert sent == [m.message_id() for m in received]
    assert_nothing_more(consumer)


def test_entry_ids_start_at_zero_on_a_new_topic(client: pulsar.Client, topic: str) -> None:
    """Entry ids count from 0 within the topic's ledger."""
    producer = client.create_producer(topic)
    ids = [producer.send(b"x") for _ in range(3)]
    assert [i.entry_id() for i in ids] == [0, 1, 2]
    assert len({i.ledger_id() for i in ids}) == 1


def test_metadata_round_trips(client: pulsar.Client, topic: str) -> None:
    """Properties, keys, event time and the producer name reach the consumer unchanged."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, producer_name="named")
    producer.send(b"x", properties={"a": "1"}, partition_key="pk", event_timestamp=1234)
    message = consumer.receive(10_000)
    assert (
        message.properties(),
        message.partition_key(),
        message.event_timestamp(),
    ) == ({"a": "1"}, "pk", 1234)
    assert message.producer_name() == "named"


def test_batches_are_delivered_message_by_message(client: pulsar.Client, topic: str) -> None:
    """A batching producer's messages arrive in order, as batch indexes of few entries."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic, batching_enabled=True, batching_max_messages=50)
    for i in range(200):
        producer.send_async(f"b{i}".encode(), lambda *_: None)
    producer.flush()
    received = receive_all(consumer, 200)
    assert [f"b{i}".encode() for i in range(200)] == [m.data() for m in received]
    assert list(range(50)) == [m.message_id().batch_index() for m in received[:50]]
    assert_nothing_more(consumer)


def test_broker_names_producers_uniquely(client: pulsar.Client, topic: str) -> None:
    """Producers without a name get distinct broker-assigned names."""
    first = client.create_producer(topic)
    second = client.create_producer(topic)
    assert first.producer_name() != second.producer_name()


def test_initial_position_earliest_sees_old_messages(client: pulsar.Client, topic: str) -> None:
    """Earliest starts a new subscription at the first entry; Latest only sees new ones.

    The "keeper" subscription holds "old" (without one it would not be kept:
    test_retention.py)."""
    client.subscribe(topic, "keeper")
    producer = client.create_producer(topic)
    producer.send(b"old")
    latest = client.subscribe(topic, "latest")
    earliest = client.subscribe(topic, "earliest", initial_position=EARLIEST)
    producer.send(b"new")
    assert [m.data() for m in receive_all(earliest, 2)] == [b"old", b"new"]
    assert [m.data() for m in receive_all(latest, 1)] == [b"new"]


def test_acknowledged_messages_are_not_redelivered(client: pulsar.Client, topic: str) -> None:
    """After acks and a consumer restart, only unacknowledged messages come back."""
    consumer = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(topic)
    for i in range(6):
        producer.send(f"m{i}".encode())
    received = receive_all(consumer, 6, ack=False)
    for message in received[:3]:
        consumer.acknowledge(message)
    consumer.close()
    again = client.subscribe(topic, "sub", consumer_type=pulsar.ConsumerType.Shared)
    assert [m.data() for m in receive_all(again, 3)] == [b"m3", b"m4", b"m5"]


def test_cumulative_ack_acknowledges_everything_before(client: pulsar.Client, topic: str) -> None:
    """A cumulative ack on an Exclusive subscription covers every earlier message."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    received = receive_all(consumer, 5, ack=False)
    consumer.acknowledge_cumulative(received[2])
    consumer.close()
    again = client.subscribe(topic, "sub")
    assert [m.data() for m in receive_all(again, 2)] == [b"m3", b"m4"]


def test_batch_index_acks_skip_acknowledged_messages(client: pulsar.Client, topic: str) -> None:
    """With batch-index acks, a redelivered batch carries only its unacknowledged messages."""
    consumer = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=500
    )
    for i in range(5):
        producer.send_async(f"m{i}".encode(), lambda *_: None)
    producer.flush()
    received = receive_all(consumer, 5, ack=False)
    consumer.acknowledge(received[0])
    consumer.acknowledge(received[1])
    consumer.close()
    again = client.subscribe(topic, "sub", batch_index_ack_enabled=True)
    assert [m.data() for m in receive_all(again, 3)] == [b"m2", b"m3", b"m4"]


def test_unsubscribe_deletes_the_subscription(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """After unsubscribe the subscription is gone from the topic's stats."""
    consumer = client.subscribe(topic, "gone")
    consumer.unsubscribe()
    assert broker.control.stats(topic)["subscriptions"] == {}


def test_get_last_message_id_names_the_last_batch_index(client: pulsar.Client, topic: str) -> None:
    """The last message id is the last entry, with the index of the batch's last message."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(
        topic, batching_enabled=True, batching_max_publish_delay_ms=200
    )
    for i in range(3):
        producer.send_async(f"m{i}".encode(), lambda *_: None)
    producer.flush()
    last = consumer.get_last_message_id()
    assert (last.entry_id(), last.batch_index()) == (0, 2)


def test_exclusive_producer_fences_a_second_producer(client: pulsar.Client, topic: str) -> None:
    """A second producer on a topic with an Exclusive producer is refused."""
    client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    with pytest.raises(pulsar.ProducerFenced):
        client.create_producer(topic)


def test_unknown_namespace_is_topic_not_found(client: pulsar.Client) -> None:
    """A topic in a namespace the broker does not know fails at once with TopicNotFound."""
    with pytest.raises(pulsar.TopicNotFound):
        client.create_producer("persistent://nobody/nowhere/t")


def test_fencing_producer_fences_the_exclusive_one(client: pulsar.Client, topic: str) -> None:
    """ExclusiveWithFencing takes the topic over; the old Exclusive producer can no longer send."""
    old = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.Exclusive)
    new = client.create_producer(topic, access_mode=pulsar.ProducerAccessMode.ExclusiveWithFencing)
    assert new.send(b"mine").entry_id() == 0
    with pytest.raises((pulsar.ProducerFenced, pulsar.AlreadyClosed)):
        old.send(b"stale")
