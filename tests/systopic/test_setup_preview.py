"""`tombstone setup` and the preview subscription, against the devstack broker's admin API (and
the real client for what the subscription holds)."""

from __future__ import annotations

import pulsar
from click.testing import CliRunner, Result

from devstack.pulsar import PulsarBrokerProcess
from services.cli import cli

SYSTEM = "persistent://pulsar/system/__ledger_deletion"
RETRY = f"{SYSTEM}-RETRY"
PREVIEW = "tombstone-preview"


def _setup(broker: PulsarBrokerProcess, *args: str, mode: str = "delete", **extra: str) -> Result:
    env = {
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": "2",
        "TOMBSTONE_DELETER_MODE": mode,
        **extra,
    }
    return CliRunner().invoke(cli, ["setup", *args], env=env)


def _partitions(broker: PulsarBrokerProcess, topic: str) -> list[list[str]]:
    return [sorted(broker.control.subscriptions(f"{topic}-partition-{i}")) for i in range(2)]


def test_a_preview_gets_its_subscription_on_the_system_and_retry_topics(
    broker: PulsarBrokerProcess,
) -> None:
    """In preview mode setup adds the preview subscription beside the deleters' own on every
    partition of the system and retry topics (not on the dead-letter topic); again: already
    there; --check passes."""
    first = _setup(broker, mode="preview")
    assert first.exit_code == 0, first.output
    for topic in (SYSTEM, RETRY):
        line = f"created: subscription {PREVIEW} on {topic} (earliest position; all 2 partitions)"
        assert line in first.output.splitlines()
        assert _partitions(broker, topic) == [["tombstone-deleter", PREVIEW]] * 2
    assert PREVIEW not in broker.control.subscriptions(f"{SYSTEM}-DLQ-partition-0")
    again = _setup(broker, mode="preview")
    assert f"already there: subscription {PREVIEW} on {SYSTEM}" in again.output
    assert _setup(broker, "--check", mode="preview").exit_code == 0


def test_check_in_preview_mode_names_the_missing_preview_subscription(
    broker: PulsarBrokerProcess,
) -> None:
    """Topics made before the preview was chosen: --check names the preview subscription as
    missing on both topics, exit 1, and creates nothing."""
    assert _setup(broker).exit_code == 0
    check = _setup(broker, "--check", mode="preview")
    assert check.exit_code == 1, check.output
    for topic in (SYSTEM, RETRY):
        assert f"missing: subscription {PREVIEW} on {topic} (all 2 partitions)" in check.output
    assert _partitions(broker, SYSTEM) == [["tombstone-deleter"]] * 2


def test_the_preview_subscription_starts_at_the_earliest_message(
    broker: PulsarBrokerProcess,
) -> None:
    """Intents published before the preview subscription exists are all delivered to it (the
    real client subscribing at its default, latest, position finds them waiting)."""
    assert _setup(broker).exit_code == 0
    client = pulsar.Client(broker.service_url)
    try:
        producer = client.create_producer(SYSTEM, batching_enabled=False)
        for i in range(10):
            producer.send(f"pdli-{i}".encode(), partition_key=str(i))
        producer.close()
        assert _setup(broker, mode="preview").exit_code == 0
        consumer = client.subscribe(SYSTEM, PREVIEW, consumer_type=pulsar.ConsumerType.Shared)
        got = set()
        for _ in range(10):
            message = consumer.receive(timeout_millis=10_000)
            consumer.acknowledge(message)
            got.add(message.data())
        assert got == {f"pdli-{i}".encode() for i in range(10)}
        consumer.close()
    finally:
        client.close()


def test_a_leftover_preview_subscription_is_reported_then_removed(
    broker: PulsarBrokerProcess,
) -> None:
    """Back in delete mode, --check reports the preview subscription as a leftover (exit 1);
    setup removes it from every partition of both topics, and the deleters' stays."""
    assert _setup(broker, mode="preview").exit_code == 0
    check = _setup(broker, "--check")
    assert check.exit_code == 1, check.output
    assert f"leftover: subscription {PREVIEW} on {SYSTEM} (all 2 partitions;" in check.output
    done = _setup(broker)
    assert done.exit_code == 0, done.output
    for topic in (SYSTEM, RETRY):
        assert f"removed: subscription {PREVIEW} on {topic}" in done.output
        assert _partitions(broker, topic) == [["tombstone-deleter"]] * 2
    assert _setup(broker, "--check").exit_code == 0
    assert PREVIEW not in _setup(broker).output


def test_removal_is_refused_while_a_preview_still_reads(broker: PulsarBrokerProcess) -> None:
    """A connected preview consumer makes the broker refuse the removal: exit 2, the line
    says to stop the previews first, and the subscription stays."""
    assert _setup(broker, mode="preview").exit_code == 0
    client = pulsar.Client(broker.service_url)
    try:
        client.subscribe(SYSTEM, PREVIEW, consumer_type=pulsar.ConsumerType.Shared)
        refused = _setup(broker)
        assert refused.exit_code == 2, refused.output
        assert "preview deleters still read it; stop them first" in refused.output
        assert PREVIEW in broker.control.subscriptions(f"{SYSTEM}-partition-0")
    finally:
        client.close()


def test_a_preview_subscription_named_as_the_deleters_is_refused(
    broker: PulsarBrokerProcess,
) -> None:
    """Removing it after the preview would remove the deleters' own: refused before any call."""
    result = _setup(
        broker, mode="preview", TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION="tombstone-deleter"
    )
    assert result.exit_code == 2
    assert "TOMBSTONE_DELETER_PREVIEW_SUBSCRIPTION" in result.output
    assert broker.control.get_partitions(SYSTEM) == 0
