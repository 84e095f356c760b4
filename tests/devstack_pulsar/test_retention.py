"""What a topic keeps, through the real client: entries published while no durable
subscription exists and no retention policy is set are gone for a subscription created later
(docs/devstack-broker.md, "What is kept"); a retention policy or an existing subscription
keeps them. Plus the admin paths `tombstone setup` uses."""

from __future__ import annotations

from pathlib import Path

import pulsar
import pytest

from devstack.pulsar import BrokerAdminError, PulsarBrokerProcess

from .conftest import assert_nothing_more, receive_all

EARLIEST = pulsar.InitialPosition.Earliest
Shared = pulsar.ConsumerType.Shared


def _send(client: pulsar.Client, topic: str, *bodies: bytes) -> None:
    producer = client.create_producer(topic)
    for body in bodies:
        producer.send(body)
    producer.close()


def test_nothing_keeps_what_is_published_without_a_subscription(
    client: pulsar.Client, topic: str
) -> None:
    """No subscription, no retention: a subscription created later at the earliest position
    gets only what was published after it."""
    _send(client, topic, b"lost-1", b"lost-2")
    consumer = client.subscribe(topic, "late", consumer_type=Shared, initial_position=EARLIEST)
    _send(client, topic, b"kept")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"kept"]
    assert_nothing_more(consumer)


def test_a_reader_cannot_read_what_was_not_kept(client: pulsar.Client, topic: str) -> None:
    """A reader at the earliest id holds nothing either."""
    _send(client, topic, b"lost")
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    _send(client, topic, b"kept")
    assert reader.read_next(10_000).data() == b"kept"
    assert not reader.has_message_available()


def test_retention_keeps_messages_for_a_later_subscription(
    broker: PulsarBrokerProcess, client: pulsar.Client, topic: str
) -> None:
    """With a topic-level retention policy, a subscription created at the earliest position
    later gets everything, on every partition."""
    broker.control.create_partitioned_topic(topic, 2)
    broker.control.set_retention(topic, minutes=-1, size_mb=-1)
    producer = client.create_producer(
        topic,
        message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        batching_enabled=False,
    )
    for i in range(6):
        producer.send(f"m{i}".encode())
    consumer = client.subscribe(topic, "late", consumer_type=Shared, initial_position=EARLIEST)
    got = sorted(m.data() for m in receive_all(consumer, 6))
    assert got == sorted(f"m{i}".encode() for i in range(6))
    assert broker.control.retention(topic) == {
        "retentionTimeInMinutes": -1,
        "retentionSizeInMB": -1,
    }


def test_an_admin_created_subscription_keeps_the_backlog(
    broker: PulsarBrokerProcess, client: pulsar.Client, topic: str
) -> None:
    """`createSubscription` before the first message: the deleters' consumer, started later,
    receives all of it; a subscription made after the messages (at earliest) does not."""
    broker.control.create_partitioned_topic(topic, 2)
    broker.control.create_subscription(topic, "deleters")
    assert broker.control.subscriptions(topic) == ["deleters"]
    _send(client, topic, b"a", b"b", b"c")
    assert broker.control.backlog(topic, "deleters") == 3
    consumer = client.subscribe(topic, "deleters", consumer_type=Shared)
    assert sorted(m.data() for m in receive_all(consumer, 3)) == [b"a", b"b", b"c"]


def test_dropping_the_last_subscription_drops_its_backlog(
    broker: PulsarBrokerProcess, client: pulsar.Client, topic: str
) -> None:
    """An operator who deletes the only subscription loses its backlog: re-created at the
    earliest position, it starts empty."""
    broker.control.create_topic(topic)
    broker.control.create_subscription(topic, "deleters")
    _send(client, topic, b"pending")
    broker.control.delete_subscription(topic, "deleters")
    broker.control.create_subscription(topic, "deleters")
    assert broker.control.backlog(topic, "deleters") == 0


def test_subscription_and_policy_admin_errors(broker: PulsarBrokerProcess, topic: str) -> None:
    """Pulsar's statuses: 409 for an existing subscription, 404 for an unknown topic, 412 for
    a policy on one partition, 204 (no body) for a policy that is not set."""
    control = broker.control
    with pytest.raises(BrokerAdminError) as absent:
        control.set_retention(topic)
    assert absent.value.status == 404
    control.create_partitioned_topic(topic, 2)
    assert control.retention(topic) is None
    control.create_subscription(topic, "s")
    with pytest.raises(BrokerAdminError) as exists:
        control.create_subscription(topic, "s")
    assert exists.value.status == 409
    with pytest.raises(BrokerAdminError) as partition:
        control.set_retention(f"{topic}-partition-0")
    assert partition.value.status == 412
    with pytest.raises(BrokerAdminError) as bad:
        control.set_retention(topic, minutes=-2)
    assert bad.value.status == 400


def test_policies_and_trim_floor_survive_a_restart(tmp_path: Path) -> None:
    """With a data directory, the retention policy and what was trimmed are reloaded."""
    with PulsarBrokerProcess(data_dir=tmp_path) as server:
        kept, lost = "persistent://public/default/kept", "persistent://public/default/lost"
        server.control.create_topic(kept)
        server.control.set_retention(kept)
        client = pulsar.Client(server.service_url)
        try:
            _send(client, kept, b"k")
            _send(client, lost, b"l")
        finally:
            client.close()
        server.restart()
        assert server.control.retention(kept) == {
            "retentionTimeInMinutes": -1,
            "retentionSizeInMB": -1,
        }
        client = pulsar.Client(server.service_url)
        try:
            on_kept = client.subscribe(kept, "s", initial_position=EARLIEST)
            assert [m.data() for m in receive_all(on_kept, 1)] == [b"k"]
            on_lost = client.subscribe(lost, "s", initial_position=EARLIEST)
            assert_nothing_more(on_lost)
        finally:
            client.close()
