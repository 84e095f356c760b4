"""The admin HTTP API: Pulsar's paths and JSON shapes for the parts the devstack covers."""

from __future__ import annotations

import pulsar
import pytest

from devstack.pulsar import BrokerAdminError, PulsarBrokerProcess

from .conftest import receive_all


def test_partitioned_topic_is_created_and_described(
    broker: PulsarBrokerProcess, topic: str
) -> None:
    """PUT .../partitions creates the topic; GET returns its count; listing shows partitions."""
    broker.control.create_partitioned_topic(topic, 2)
    assert broker.control.get_partitions(topic) == 2
    assert [f"{topic}-partition-0", f"{topic}-partition-1"] == broker.control.list_topics(
        "public/default"
    )


def test_creating_a_partitioned_topic_twice_conflicts(
    broker: PulsarBrokerProcess, topic: str
) -> None:
    """A second creation of the same partitioned topic answers 409."""
    broker.control.create_partitioned_topic(topic, 2)
    with pytest.raises(BrokerAdminError) as caught:
        broker.control.create_partitioned_topic(topic, 2)
    assert caught.value.status == 409


def test_unknown_namespace_is_not_found(broker: PulsarBrokerProcess) -> None:
    """Admin calls on a namespace the broker does not know answer 404."""
    with pytest.raises(BrokerAdminError) as caught:
        broker.control.create_partitioned_topic("persistent://nobody/nowhere/t", 2)
    assert caught.value.status == 404


def test_stats_report_backlog_per_subscription(
    client: pulsar.Client, broker: PulsarBrokerProcess, topic: str
) -> None:
    """msgBacklog counts what each subscription has not acknowledged."""
    reader = client.subscribe(topic, "reader")
    client.subscribe(topic, "idle")
    producer = client.create_producer(topic)
    for i in range(3):
        producer.send(f"m{i}".encode())
    receive_all(reader, 3)
    reader.close()  # flushes the acks
    subscriptions = broker.control.stats(topic)["subscriptions"]
    assert {k: v["msgBacklog"] for k, v in subscriptions.items()} == {"reader": 0, "idle": 3}


def test_partitioned_stats_sum_the_partitions(
    client: pulsar.Client, broker: PulsarBrokerProcess, topic: str
) -> None:
    """partitioned-stats sums msgBacklog over partitions and lists each partition."""
    broker.control.create_partitioned_topic(topic, 2)
    client.subscribe(topic, "sub")
    producer = client.create_producer(topic)
    for i in range(4):
        producer.send(f"m{i}".encode())
    stats = broker.control.partitioned_stats(topic)
    assert (
        stats["subscriptions"]["sub"]["msgBacklog"],
        stats["metadata"]["partitions"],
        len(stats["partitions"]),
    ) == (4, 2, 2)


def test_created_namespace_accepts_topics(
    client: pulsar.Client, broker: PulsarBrokerProcess
) -> None:
    """A namespace created through admin can hold topics right away."""
    broker.control.create_namespace("tenant/ns")
    producer = client.create_producer("persistent://tenant/ns/t")
    assert producer.send(b"x").entry_id() == 0


def test_reset_forgets_topics(
    client: pulsar.Client, broker: PulsarBrokerProcess, topic: str
) -> None:
    """reset() drops every topic and added namespace."""
    client.create_producer(topic).send(b"x")
    broker.control.create_namespace("tenant/ns")
    broker.control.reset()
    assert broker.control.list_topics("public/default") == []
    with pytest.raises(BrokerAdminError):
        broker.control.list_topics("tenant/ns")
