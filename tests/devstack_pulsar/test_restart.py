"""The on-disk mode across broker restarts: clients reconnect by themselves, nothing is lost."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from devstack.pulsar import PulsarBrokerProcess
from tests.helpers import assert_eventually

from .conftest import ClientLog

Shared = pulsar.ConsumerType.Shared


@pytest.fixture
def disk_broker(tmp_path: Path) -> Iterator[PulsarBrokerProcess]:
    with PulsarBrokerProcess(data_dir=tmp_path / "data") as server:
        yield server


@pytest.fixture
def disk_client(disk_broker: PulsarBrokerProcess, client_log: ClientLog) -> Iterator[pulsar.Client]:
    client = pulsar.Client(
        disk_broker.service_url, logger=client_log.logger, operation_timeout_seconds=15
    )
    yield client
    client.close()


def _drain(consumer: pulsar.Consumer) -> list[pulsar.Message]:
    got: list[pulsar.Message] = []
    while True:
        try:
            message = consumer.receive(timeout_millis=1000)
        except pulsar.Timeout:
            return got
        consumer.acknowledge(message)
        got.append(message)


async def _wait_backlog(broker: PulsarBrokerProcess, topic: str, expected: int) -> None:
    async def check() -> None:
        assert expected == broker.control.backlog(topic, "sub")

    await assert_eventually(check)


def _send_while_down(producer: pulsar.Producer, broker: PulsarBrokerProcess) -> threading.Event:
    """Stop the broker, send one message, start the broker; the event is set on success."""
    sent = threading.Event()

    def on_sent(result: pulsar.Result, _id: object) -> None:
        if result == pulsar.Result.Ok:
            sent.set()

    broker.stop()
    producer.send_async(b"while-down", on_sent)
    broker.start()
    return sent


async def test_graceful_restart_keeps_everything(
    disk_broker: PulsarBrokerProcess, disk_client: pulsar.Client, topic: str
) -> None:
    """After a restart, unacked messages come back, acked ones do not, and a send made while
    the broker was down is delivered; message ids never repeat."""
    consumer = disk_client.subscribe(topic, "sub", consumer_type=Shared)
    producer = disk_client.create_producer(topic, producer_name="keeper")
    before = [producer.send(f"m{i}".encode()) for i in range(10)]
    received = [consumer.receive(timeout_millis=10_000) for _ in range(10)]
    for message in received[:5]:
        consumer.acknowledge(message)
    await _wait_backlog(disk_broker, topic, 5)
    assert _send_while_down(producer, disk_broker).wait(30)
    after = producer.send(b"after")
    again = _drain(consumer)
    expected = [f"m{i}".encode() for i in range(5, 10)] + [b"while-down", b"after"]
    assert sorted(expected) == sorted(m.data() for m in again)
    assert max((i.ledger_id(), i.entry_id()) for i in before) < (
        after.ledger_id(),
        after.entry_id(),
    )


async def test_killed_broker_loses_nothing_unacknowledged(
    disk_broker: PulsarBrokerProcess, disk_client: pulsar.Client, topic: str
) -> None:
    """After SIGKILL and a start, every message without an ack is delivered again and the
    producer's dedup state survives."""
    consumer = disk_client.subscribe(topic, "sub", consumer_type=Shared)
    producer = disk_client.create_producer(topic, producer_name="survivor")
    for i in range(10):
        producer.send(f"m{i}".encode())
    received = [consumer.receive(timeout_millis=10_000) for _ in range(10)]
    for message in received[:5]:
        consumer.acknowledge(message)
    await _wait_backlog(disk_broker, topic, 5)
    disk_broker.restart(kill=True)
    producer.send(b"after")
    got = {m.data() for m in _drain(consumer)}
    assert {f"m{i}".encode() for i in range(5, 10)} | {b"after"} <= got
    producer.close()
    reopened = disk_client.create_producer(topic, producer_name="survivor")
    assert reopened.last_sequence_id() == 10


def test_restart_keeps_namespaces_partitions_and_subscriptions(
    disk_broker: PulsarBrokerProcess, disk_client: pulsar.Client
) -> None:
    """Namespaces, partitioned topics and their subscriptions' backlogs survive a restart."""
    topic = "persistent://team/ns/parts"
    disk_broker.control.create_namespace("team/ns")
    disk_broker.control.create_partitioned_topic(topic, 2)
    disk_client.subscribe(topic, "sub").close()
    producer = disk_client.create_producer(topic)
    for i in range(4):
        producer.send(f"m{i}".encode())
    disk_broker.restart()
    assert (
        disk_broker.control.get_partitions(topic),
        disk_broker.control.backlog(topic, "sub"),
    ) == (2, 4)
