"""`tombstone setup` against the devstack broker's admin API (and the real client for what the
topics then keep)."""

from __future__ import annotations

import pulsar
from click.testing import CliRunner, Result

from devstack.pulsar import PulsarBrokerProcess
from services.cli import cli

SYSTEM = "persistent://pulsar/system/__ledger_deletion"
TOPICS = (SYSTEM, f"{SYSTEM}-RETRY", f"{SYSTEM}-DLQ")


def _setup(broker: PulsarBrokerProcess, *args: str, partitions: int = 4) -> Result:
    env = {
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(partitions),
    }
    return CliRunner().invoke(cli, ["setup", *args], env=env)


def test_setup_creates_everything_and_is_idempotent(broker: PulsarBrokerProcess) -> None:
    """The first run creates each item (one line each); the second finds them all; --check
    passes; the broker holds what was asked for."""
    first = _setup(broker)
    assert first.exit_code == 0, first.output
    lines = first.output.splitlines()
    assert len(lines) == 12
    assert all(line.startswith("created: ") for line in lines), lines
    assert (
        f"created: subscription tombstone-deleter on {SYSTEM} (earliest position; all 4 partitions)"
    ) in lines

    second = _setup(broker)
    assert second.exit_code == 0, second.output
    assert all(line.startswith("already there: ") for line in second.output.splitlines())
    assert len(second.output.splitlines()) == 12

    check = _setup(broker, "--check")
    assert check.exit_code == 0, check.output

    control = broker.control
    for topic in TOPICS:
        assert control.get_partitions(topic) == 4
        assert control.retention(topic) == {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
    assert control.subscriptions(SYSTEM) == ["tombstone-deleter"]
    assert control.subscriptions(f"{SYSTEM}-RETRY") == ["tombstone-deleter"]
    assert control.subscriptions(f"{SYSTEM}-DLQ") == ["tombstone-dlq"]
    for index in range(4):
        assert control.subscriptions(f"{SYSTEM}-partition-{index}") == ["tombstone-deleter"]


def test_check_reports_each_missing_item(broker: PulsarBrokerProcess) -> None:
    """On an empty broker --check creates nothing and names every item as missing."""
    result = _setup(broker, "--check")
    assert result.exit_code == 1
    subscriptions = ("tombstone-deleter", "tombstone-deleter", "tombstone-dlq")
    assert result.output.splitlines() == [
        line
        for topic, subscription in zip(TOPICS, subscriptions, strict=True)
        for line in (
            f"missing: topic {topic} (4 partitions)",
            f"missing: subscription {subscription} on {topic} (no topic)",
            f"missing: retention of {topic} (no topic)",
            f"missing: inactive-topic policy of {topic} (no topic)",
        )
    ]
    assert broker.control.get_partitions(SYSTEM) == 0


def test_check_reports_a_dropped_subscription(broker: PulsarBrokerProcess) -> None:
    """An operator who drops the deleters' subscription: --check says so, setup restores it."""
    assert _setup(broker).exit_code == 0
    broker.control.delete_subscription(f"{SYSTEM}-partition-2", "tombstone-deleter")
    check = _setup(broker, "--check")
    assert check.exit_code == 1
    missing = [line for line in check.output.splitlines() if line.startswith("missing")]
    assert missing == [f"missing: subscription tombstone-deleter on {SYSTEM} (partitions 2 of 4)"]
    repaired = _setup(broker)
    assert repaired.exit_code == 0
    assert (
        f"created: subscription tombstone-deleter on {SYSTEM} (earliest position; "
        "partitions 2 of 4)"
    ) in repaired.output.splitlines()


def test_another_partition_count_is_an_error_naming_both(broker: PulsarBrokerProcess) -> None:
    """A topic with 2 partitions is never changed to 4: exit 2 and a line with both counts."""
    broker.control.create_partitioned_topic(SYSTEM, 2)
    result = _setup(broker)
    assert result.exit_code == 2
    assert (
        f"wrong: topic {SYSTEM} (it has 2 partitions but TOMBSTONE_PULSAR_TOPIC_PARTITIONS "
        "is 4; setup never changes a partition count)"
    ) in result.output.splitlines()
    assert broker.control.get_partitions(SYSTEM) == 2


def test_a_different_retention_is_changed(broker: PulsarBrokerProcess) -> None:
    """An existing retention other than the one asked for is replaced, and said so."""
    assert _setup(broker).exit_code == 0
    result = _setup(broker, "--retention-minutes", "1440", "--retention-size-mb", "1024")
    assert result.exit_code == 0
    assert (
        f"changed: retention of {SYSTEM} (infinite, infinite -> 1440 min, 1024 MB)"
        in result.output.splitlines()
    )
    assert _setup(broker, "--check").exit_code == 0


def test_an_unreachable_admin_api_is_exit_3() -> None:
    env = {"TOMBSTONE_DELETER_PULSAR_ADMIN_URL": "http://127.0.0.1:9"}
    result = CliRunner().invoke(cli, ["setup", "--check"], env=env)
    assert result.exit_code == 3
    assert "admin API unavailable" in result.output


def test_intents_published_after_setup_wait_for_the_deleters(broker: PulsarBrokerProcess) -> None:
    """With no consumer connected, what is published after setup stays for the deleters'
    subscription (the real client, both ends)."""
    assert _setup(broker, partitions=2).exit_code == 0
    client = pulsar.Client(broker.service_url)
    try:
        producer = client.create_producer(SYSTEM, batching_enabled=False)
        for i in range(10):
            producer.send(f"pdli-{i}".encode(), partition_key=str(i))
        producer.close()
        consumer = client.subscribe(
            SYSTEM, "tombstone-deleter", consumer_type=pulsar.ConsumerType.Shared
        )
        got = set()
        for _ in range(10):
            message = consumer.receive(timeout_millis=10_000)
            consumer.acknowledge(message)
            got.add(message.data())
        assert got == {f"pdli-{i}".encode() for i in range(10)}
    finally:
        client.close()
