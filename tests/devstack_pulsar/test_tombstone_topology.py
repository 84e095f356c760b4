"""The topics Tombstone uses (docs/design.md §5): a partitioned system topic, a retry and a DLQ
topic."""

from __future__ import annotations

import time

import pulsar

from devstack.pulsar import PulsarBrokerProcess

from .conftest import receive_all

SYSTEM = "persistent://pulsar/system/__ledger_deletion"
RETRY = f"{SYSTEM}-RETRY"


def test_system_topic_retry_with_delay_and_reader(
    client: pulsar.Client, broker: PulsarBrokerProcess
) -> None:
    """A Shared consumer reads the partitioned system topic; a retry copy published with
    deliver_after arrives on the retry topic only after its delay; the backlog drains."""
    broker.control.create_partitioned_topic(SYSTEM, 2)
    consumer = client.subscribe(
        [SYSTEM, RETRY], "tombstone", consumer_type=pulsar.ConsumerType.Shared
    )
    client.create_producer(SYSTEM, producer_name="marker").send(b"pdli", partition_key="ledger-7")
    first = receive_all(consumer, 1)[0]
    retry_at = int(time.time() * 1000) + 500
    retry = client.create_producer(RETRY)
    retry.send(first.data(), properties={"retry-count": "1"}, deliver_at=retry_at)
    again = receive_all(consumer, 1)[0]
    assert (again.data(), again.properties()["retry-count"]) == (b"pdli", "1")
    assert int(time.time() * 1000) >= retry_at
    assert broker.control.backlog(SYSTEM, "tombstone") == 0


def _retained(broker: PulsarBrokerProcess, topic: str) -> None:
    """A reader holds nothing: only a retention policy keeps what it is to read later."""
    broker.control.create_topic(topic)
    broker.control.set_retention(topic)


def test_reader_starts_at_a_message_id(
    broker: PulsarBrokerProcess, client: pulsar.Client, topic: str
) -> None:
    """A reader (non-durable subscription) starting at an id reads what follows it."""
    _retained(broker, topic)
    producer = client.create_producer(topic)
    ids = [producer.send(f"m{i}".encode()) for i in range(3)]
    reader = client.create_reader(topic, ids[0])
    assert [reader.read_next(10_000).data() for _ in range(2)] == [b"m1", b"m2"]
    reader.close()


def test_reader_seek_by_timestamp_keeps_its_subscription(
    broker: PulsarBrokerProcess, client: pulsar.Client, topic: str
) -> None:
    """A reader seeking to a publish time reads from there (its subscription survives)."""
    _retained(broker, topic)
    producer = client.create_producer(topic)
    producer.send(b"before")
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    producer.send(b"after")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    assert reader.read_next(10_000).data() == b"before"
    reader.seek(middle)
    assert reader.read_next(10_000).data() == b"after"
    reader.close()
