"""Subscription types, negative acks, redelivery counts, dead letters, delays and seeks."""

from __future__ import annotations

import time
from datetime import timedelta

import pulsar
import pytest

from .conftest import assert_nothing_more, receive_all

Shared = pulsar.ConsumerType.Shared
KeyShared = pulsar.ConsumerType.KeyShared
Failover = pulsar.ConsumerType.Failover
EARLIEST = pulsar.InitialPosition.Earliest


def _drain(consumer: pulsar.Consumer) -> list[bytes]:
    """Receive and ack until nothing more arrives within 500 ms."""
    got: list[bytes] = []
    while True:
        try:
            message = consumer.receive(timeout_millis=500)
        except pulsar.Timeout:
            return got
        consumer.acknowledge(message)
        got.append(message.data())


def test_exclusive_refuses_a_second_consumer(client: pulsar.Client, topic: str) -> None:
    """An Exclusive subscription with a consumer answers ConsumerBusy to another one."""
    client.subscribe(topic, "sub")
    with pytest.raises(pulsar.ConsumerBusy):
        client.subscribe(topic, "sub")


def test_shared_spreads_messages_over_consumers(client: pulsar.Client, topic: str) -> None:
    """Two Shared consumers together receive every message exactly once."""
    first = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=5)
    second = client.subscribe(topic, "sub", consumer_type=Shared, receiver_queue_size=5)
    producer = client.create_producer(topic)
    for i in range(40):
        producer.send(f"m{i}".encode())
    got_first, got_second = _drain(first), _drain(second)
    assert sorted(f"m{i}".encode() for i in range(40)) == sorted(got_first + got_second)
    assert got_first
    assert got_second


def test_failover_feeds_one_consumer_then_the_next(client: pulsar.Client, topic: str) -> None:
    """Only the active Failover consumer receives; when it leaves, the other takes over."""
    first = client.subscribe(topic, "sub", consumer_type=Failover, consumer_name="a")
    second = client.subscribe(topic, "sub", consumer_type=Failover, consumer_name="b")
    producer = client.create_producer(topic)
    for i in range(5):
        producer.send(f"m{i}".encode())
    assert [f"m{i}".encode() for i in range(5)] == _drain(first)
    assert _drain(second) == []
    first.close()
    producer.send(b"after")
    assert _drain(second) == [b"after"]


def test_key_shared_keeps_each_key_on_one_consumer(client: pulsar.Client, topic: str) -> None:
    """Every message is delivered once, and all messages of a key go to the same consumer."""
    first = client.subscribe(topic, "sub", consumer_type=KeyShared)
    second = client.subscribe(topic, "sub", consumer_type=KeyShared)
    producer = client.create_producer(topic)
    for i in range(60):
        producer.send(f"{i}".encode(), partition_key=f"k{i % 12}")
    owners: dict[str, set[int]] = {}
    total = 0
    for number, consumer in enumerate((first, second)):
        while True:
            try:
                message = consumer.receive(timeout_millis=500)
            except pulsar.Timeout:
                break
            consumer.acknowledge(message)
            owners.setdefault(message.partition_key(), set()).add(number)
            total += 1
    assert total == 60
    assert all(len(who) == 1 for who in owners.values())


def test_nack_redelivers_with_increasing_counts(client: pulsar.Client, topic: str) -> None:
    """On Shared, each negative ack brings the message back with redelivery count + 1."""
    consumer = client.subscribe(
        topic, "sub", consumer_type=Shared, negative_ack_redelivery_delay_ms=100
    )
    client.create_producer(topic).send(b"again")
    counts = []
    for _ in range(3):
        message = consumer.receive(timeout_millis=10_000)
        counts.append(message.redelivery_count())
        consumer.negative_acknowledge(message)
    assert counts == [0, 1, 2]


def test_exclusive_nack_rewinds_in_order(client: pulsar.Client, topic: str) -> None:
    """On Exclusive, a negative ack redelivers everything unacknowledged, in order."""
    consumer = client.subscribe(topic, "sub", negative_ack_redelivery_delay_ms=100)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    first = receive_all(consumer, 3, ack=False)
    for message in first:
        consumer.negative_acknowledge(message)
    again = receive_all(consumer, 3)
    assert [m.data() for m in again] == [b"m0", b"m1", b"m2"]
    assert_nothing_more(consumer)


def test_redeliver_unacknowledged_counts_on_shared(client: pulsar.Client, topic: str) -> None:
    """redeliver_unacknowledged_messages() on Shared sends all pending back, counted."""
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    for i in range(2):
        producer.send(f"m{i}".encode())
    receive_all(consumer, 2, ack=False)
    consumer.redeliver_unacknowledged_messages()
    again = receive_all(consumer, 2)
    assert [m.redelivery_count() for m in again] == [1, 1]


def test_dead_letter_policy_ends_in_the_dlq_topic(client: pulsar.Client, topic: str) -> None:
    """After max redeliveries the client moves the message to <topic>-<sub>-DLQ."""
    policy = pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2)
    consumer = client.subscribe(
        topic,
        "sub",
        consumer_type=Shared,
        negative_ack_redelivery_delay_ms=100,
        dead_letter_policy=policy,
    )
    dlq = client.subscribe(f"{topic}-sub-DLQ", "dlq-reader", initial_position=EARLIEST)
    sent = client.create_producer(topic).send(b"poison", properties={"k": "v"})
    for _ in range(3):
        consumer.negative_acknowledge(consumer.receive(timeout_millis=10_000))
    dead = dlq.receive(timeout_millis=10_000)
    origin = f"({sent.ledger_id()},{sent.entry_id()},-1,-1)"
    assert (b"poison", "v", origin, topic) == (
        dead.data(),
        dead.properties()["k"],
        dead.properties()["ORIGIN_MESSAGE_ID"],
        dead.properties()["REAL_TOPIC"],
    )
    assert_nothing_more(consumer)


def test_deliver_after_is_held_back_on_shared(client: pulsar.Client, topic: str) -> None:
    """A delayed message reaches a Shared consumer only once its delivery time has come."""
    consumer = client.subscribe(topic, "sub", consumer_type=Shared)
    producer = client.create_producer(topic)
    deliver_at = int(time.time() * 1000) + 1200
    producer.send(b"later", deliver_at=deliver_at)
    producer.send(b"now")
    assert consumer.receive(timeout_millis=10_000).data() == b"now"
    message = consumer.receive(timeout_millis=10_000)
    assert message.data() == b"later"
    assert int(time.time() * 1000) >= deliver_at


def test_deliver_after_is_ignored_on_exclusive(client: pulsar.Client, topic: str) -> None:
    """As in Pulsar, Exclusive subscriptions get delayed messages at once, in order."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"later", deliver_at=int(time.time() * 1000) + 60_000)
    producer.send(b"now")
    assert [m.data() for m in receive_all(consumer, 2)] == [b"later", b"now"]


def test_seek_to_earliest_redelivers_acknowledged(client: pulsar.Client, topic: str) -> None:
    """Seeking to the earliest position forgets acks: everything comes again."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    receive_all(consumer, 3)
    consumer.seek(pulsar.MessageId.earliest)
    assert [m.data() for m in receive_all(consumer, 3)] == [b"m0", b"m1", b"m2"]


def test_seek_to_a_message_id_restarts_after_it(client: pulsar.Client, topic: str) -> None:
    """Seeking to an id delivers from the message after it (the client skips the id itself)."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(4)]
    receive_all(consumer, 4)
    consumer.seek(ids[1])
    assert [m.data() for m in receive_all(consumer, 2)] == [b"m2", b"m3"]


def test_seek_to_a_timestamp(client: pulsar.Client, topic: str) -> None:
    """Seeking to a publish time delivers the messages published at or after it."""
    consumer = client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    producer.send(b"before")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    producer.send(b"after")
    receive_all(consumer, 2)
    consumer.seek(middle)
    assert [m.data() for m in receive_all(consumer, 1)] == [b"after"]


def test_deliver_after_is_held_back_on_key_shared(client: pulsar.Client, topic: str) -> None:
    """Key_Shared subscriptions hold delayed messages back too."""
    consumer = client.subscribe(topic, "sub", consumer_type=KeyShared)
    producer = client.create_producer(topic)
    earliest = int(time.time() * 1000) + 800
    producer.send(b"later", partition_key="k", deliver_after=timedelta(milliseconds=800))
    producer.send(b"now", partition_key="j")
    assert consumer.receive(timeout_millis=10_000).data() == b"now"
    assert consumer.receive(timeout_millis=10_000).data() == b"later"
    assert int(time.time() * 1000) >= earliest


def test_sticky_key_shared_ranges_split_keys(client: pulsar.Client, topic: str) -> None:
    """Two STICKY consumers owning halves of the hash range together get every message once."""
    halves = [[(0, 32767)], [(32768, 65535)]]
    consumers = [
        client.subscribe(
            topic,
            "sub",
            consumer_type=KeyShared,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                key_shared_mode=pulsar.KeySharedMode.Sticky, sticky_ranges=ranges
            ),
        )
        for ranges in halves
    ]
    producer = client.create_producer(topic)
    for i in range(40):
        producer.send(f"{i}".encode(), partition_key=f"key-{i}")
    got = [m for c in consumers for m in _drain(c)]
    assert sorted(f"{i}".encode() for i in range(40)) == sorted(got)


def test_zero_queue_consumer_receives_one_at_a_time(client: pulsar.Client, topic: str) -> None:
    """A consumer with receiver_queue_size=0 asks for each message and gets them in order."""
    consumer = client.subscribe(topic, "sub", receiver_queue_size=0)
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    got = []
    for _ in range(3):
        message = consumer.receive()
        consumer.acknowledge(message)
        got.append(message.data())
    assert got == [b"m0", b"m1", b"m2"]
