"""Rounds against the devstack broker with the real client: one receipt decides a round."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pulsar

from devstack.pulsar import PulsarBrokerProcess
from services.systopic import OutgoingMessage, SendResult, encode_intent
from services.systopic._lanes import PartitionLane
from services.systopic.rounds import CUT_OFF
from tests.marker.live import read_topic
from tombstone.v1 import pending_delete_pb2 as _pd

TOPIC = "persistent://pulsar/system/__ledger_deletion"
_QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def _messages(count: int, *, first: int = 0, padding: int = 0) -> list[OutgoingMessage]:
    return [
        encode_intent(
            _pd.PendingDeleteLedgerInfo(
                ledger_id=i, ledger_type=_pd.LEDGER, request_id="x" * padding
            )
        )
        for i in range(first, first + count)
    ]


@asynccontextmanager
async def _lane(
    broker: PulsarBrokerProcess,
    *,
    batch_limit: int = 10_000,
    max_messages: int = 1000,
    max_bytes: int = 1 << 20,
    receipt_timeout: float = 30.0,
) -> AsyncIterator[PartitionLane]:
    """A lane over a producer on the (non-partitioned) test topic."""
    broker.control.create_topic(TOPIC)
    broker.control.set_retention(TOPIC)
    client = pulsar.Client(broker.service_url, logger=_QUIET)
    producer = client.create_producer(
        TOPIC,
        producer_name="lane-test",
        batching_enabled=True,
        batching_max_messages=batch_limit,
        batching_max_allowed_size_in_bytes=4 << 20,
        batching_max_publish_delay_ms=1000,
        send_timeout_millis=20_000,
    )
    lane = PartitionLane(
        producer, max_messages=max_messages, max_bytes=max_bytes, receipt_timeout=receipt_timeout
    )
    try:
        yield lane
    finally:
        await lane.close()
        await asyncio.to_thread(client.close)


async def _send(lane: PartitionLane, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
    future: asyncio.Future[list[SendResult]] = asyncio.get_running_loop().create_future()
    lane.submit(messages, future.set_result)
    return await future


async def test_every_message_of_a_round_is_accepted_and_stored(
    broker: PulsarBrokerProcess,
) -> None:
    """Several submissions queued at once, more than one round's worth: every message has its
    own message id, and the topic holds each once."""
    async with _lane(broker, max_messages=300) as lane:
        results = await asyncio.gather(
            *(_send(lane, _messages(200, first=i * 200)) for i in range(4))
        )
    flat = [r for part in results for r in part]
    received = await read_topic(broker, 800)
    assert (sum(r.ok for r in flat), len({r.message_id for r in flat})) == (800, 800)
    assert list(range(800)) == sorted(r.pdli.ledger_id for r in received)


async def test_a_batch_cut_by_the_client_counts_the_earlier_messages_as_failed(
    broker: PulsarBrokerProcess,
) -> None:
    """The client cuts batches every 10 messages (a limit below the round size): the tail's
    batch holds only the last 5 of 25, so the 20 before are reported as not accepted, even
    though the broker stored them (the safe direction)."""
    async with _lane(broker, batch_limit=10, max_messages=25) as lane:
        results = await _send(lane, _messages(25))
    received = await read_topic(broker, 25)
    assert ([False] * 20 + [True] * 5, {CUT_OFF}) == (
        [r.ok for r in results],
        {r.error for r in results[:20]},
    )
    assert len(received) == 25


async def test_rounds_stay_under_the_byte_limit(broker: PulsarBrokerProcess) -> None:
    """Large messages are split over several rounds by size; all are accepted."""
    async with _lane(broker, max_bytes=100_000) as lane:
        results = await _send(lane, _messages(12, padding=30_000))
    assert [r.ok for r in results] == [True] * 12


async def test_a_refused_batch_fails_its_round_and_the_next_round_proceeds(
    broker: PulsarBrokerProcess,
) -> None:
    """The broker refuses one batch for good: that round fails with the broker's reason; the
    next submission is a new round and is accepted."""
    async with _lane(broker) as lane:
        broker.control.fail_sends(1, error="ChecksumError")
        refused = await _send(lane, _messages(5))
        accepted = await _send(lane, _messages(5, first=5))
    received = await read_topic(broker, 5)
    assert ([r.ok for r in refused], [r.ok for r in accepted]) == ([False] * 5, [True] * 5)
    assert all("ChecksumError" in (r.error or "") for r in refused)
    assert sorted(r.pdli.ledger_id for r in received) == [5, 6, 7, 8, 9]


async def test_no_receipt_in_time_fails_the_round_and_a_late_one_changes_nothing(
    broker: PulsarBrokerProcess,
) -> None:
    """The broker holds the first round 1.5 s, past the lane's 1 s receipt timeout: that round
    fails with "no receipt"; the next round (sent after the fault window) is accepted, and the
    first round's late receipt, arriving while it is in flight, does not disturb it."""
    async with _lane(broker, receipt_timeout=1.0) as lane:
        broker.control.delay_sends(1.5, duration=0.2)
        late = await _send(lane, _messages(3))
        accepted = await _send(lane, _messages(3, first=3))
    assert (
        [r.error for r in late],
        [r.ok for r in accepted],
    ) == (["no receipt within 1 s"] * 3, [True] * 3)


async def test_a_round_sent_while_reconnecting_is_accepted(
    broker: PulsarBrokerProcess,
) -> None:
    """The broker drops every connection just before a round: its flush may find the producer
    reconnecting, and the client's batch timer then sends it; all messages are accepted and
    stored once."""
    async with _lane(broker) as lane:
        await _send(lane, _messages(1, first=1000))
        await asyncio.to_thread(broker.control.drop_connections)
        results = await _send(lane, _messages(50))
    received = await read_topic(broker, 51)
    assert [r.ok for r in results] == [True] * 50
    assert [*range(50), 1000] == sorted(r.pdli.ledger_id for r in received)
