"""The Pulsar adapter of `IntentPublisher` against the devstack broker."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devstack.pulsar import PulsarBrokerProcess
from services.core.errors import FailedPrecondition
from services.systopic import OutgoingMessage, ProducerSettings, open_intent_publisher
from tests.marker.live import TOPIC, create_system_topic, pulsar_config, read_topic


def _messages(count: int) -> list[OutgoingMessage]:
    from services.systopic import encode_intent
    from tombstone.v1 import pending_delete_pb2 as _pd

    return [
        encode_intent(_pd.PendingDeleteLedgerInfo(ledger_id=i, ledger_type=_pd.LEDGER))
        for i in range(count)
    ]


async def test_every_message_gets_its_own_receipt(broker: PulsarBrokerProcess) -> None:
    """A call larger than the window is sent in chunks; each message has a message id and is
    stored once, under the stable producer name."""
    create_system_topic(broker)
    settings = ProducerSettings(producer_name="pub-test", max_in_flight=64)
    async with open_intent_publisher(pulsar_config(broker), settings) as publisher:
        results = await publisher.publish(_messages(200))
        name = publisher.producer_name
    received = await read_topic(broker, 200)
    assert (len(results), all(r.ok for r in results), name) == (200, True, "pub-test")
    assert list(range(200)) == sorted(r.pdli.ledger_id for r in received)
    assert {"pub-test"} == {r.producer_name for r in received}


async def test_refused_sends_fail_with_a_reason(broker: PulsarBrokerProcess) -> None:
    """Sends the broker refuses for good (ChecksumError is not retried by the client) fail
    with the broker's reason; nothing is reported accepted or stored."""
    create_system_topic(broker)
    settings = ProducerSettings(producer_name="pub-fail", send_timeout=timedelta(seconds=5))
    async with open_intent_publisher(pulsar_config(broker), settings) as publisher:
        broker.control.fail_sends(100, error="ChecksumError")
        results = await publisher.publish(_messages(5))
        broker.control.clear_faults()
    assert (
        [r.ok for r in results],
        all("ChecksumError" in (r.error or "") for r in results),
    ) == ([False] * 5, True)
    assert await read_topic(broker, 0) == []


async def test_partition_count_mismatch_refuses_to_start(broker: PulsarBrokerProcess) -> None:
    """A system topic with another partition count than configured stops the start."""
    create_system_topic(broker, partitions=2)
    with pytest.raises(
        FailedPrecondition,
        match=f"{TOPIC} has 2 partitions but TOMBSTONE_PULSAR_TOPIC_PARTITIONS is 4",
    ):
        async with open_intent_publisher(
            pulsar_config(broker, partitions=4), ProducerSettings(producer_name="x")
        ):
            pass
