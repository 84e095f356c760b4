"""The follower on the devstack Oxia server when Oxia fails it: its notification streams cut
(what a leader change or a network blip does to Oxia's `GetNotifications`), and its session
expired (ZooKeeper's session expiry has its own test in test_recovery.py). Each time it
misses the events of a trim made meanwhile, and a re-read must make them intents."""

from __future__ import annotations

import asyncio

import pytest

from devstack.oxia import OxiaServer
from devstack.pulsar import PulsarBrokerProcess
from services.metadata.store import MetadataStore
from tests.follower.live import counter, running_follower
from tests.helpers import assert_eventually
from tests.marker.builders import CURSOR_PATH, ML_PATH, cursor_bytes, ledger, ml_bytes
from tests.marker.live import Received, create_system_topic, read_topic
from tests.store_kinds import StoreKind


def _ids(received: list[Received]) -> set[int]:
    return {r.pdli.ledger_id for r in received}


@pytest.fixture(params=["oxia"])
def store_kind(request: pytest.FixtureRequest) -> StoreKind:
    """Oxia only: these faults are Oxia's (the module's `store_kind` overrides the shared
    parametrization)."""
    kind: StoreKind = request.getfixturevalue("oxia_store_kind")
    return kind


def _server(store_kind: StoreKind) -> OxiaServer:
    assert store_kind.oxia is not None
    return store_kind.oxia


async def _trim(writer: MetadataStore, keep: range) -> None:
    """`ManagedLedgerImpl.internalTrimLedgers`: the shorter list, in one write."""
    current = await writer.get(ML_PATH)
    await writer.set(ML_PATH, ml_bytes(*(ledger(i) for i in keep)), version=current.version)


async def test_a_trim_while_the_notification_streams_are_cut_becomes_an_intent(
    store_kind: StoreKind, broker: PulsarBrokerProcess
) -> None:
    """Every notification stream ends (UNAVAILABLE) and a trim and an unsubscribe are written
    before the client has resumed: the follower re-reads (or resumes the stream from its
    offset) and sends both; the trim before the cut is not sent again."""
    create_system_topic(broker)
    async with store_kind.open() as writer:
        await writer.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 6))), make_parents=True)
        await writer.create(CURSOR_PATH, cursor_bytes(20))
        async with running_follower(store_kind, broker) as running:
            await running.ready()
            await _trim(writer, range(2, 6))
            assert {1} == _ids(await read_topic(broker, 1))
            _server(store_kind).drop_notification_streams()
            await _trim(writer, range(4, 6))
            cursor = await writer.get(CURSOR_PATH)
            await writer.delete(CURSOR_PATH, version=cursor.version)
            received = await read_topic(broker, 3)
            await running.ready()
    assert {2, 3, 20} == _ids(received)
    assert len(received) == 3


async def test_an_expired_session_gives_the_leadership_up_and_it_is_taken_again(
    store_kind: StoreKind, broker: PulsarBrokerProcess
) -> None:
    """Oxia expires the follower's session (its ephemeral leader record is deleted): the
    follower stops publishing, opens a new session, leads again and re-reads; the trim made
    while it had no session is sent once, and the one sent before is not sent again."""
    create_system_topic(broker)
    async with store_kind.open() as writer:
        await writer.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 6))), make_parents=True)
        async with running_follower(store_kind, broker) as running:
            await running.ready()
            await _trim(writer, range(2, 6))
            assert {1} == _ids(await read_topic(broker, 1))
            session = running.store.session_id
            await asyncio.to_thread(_server(store_kind).expire_sessions)
            await _trim(writer, range(3, 6))
            received = await read_topic(broker, 1)

            async def new_session() -> None:
                assert running.store.session_id != session

            await assert_eventually(new_session, timeout=20)

            async def read_again() -> None:
                # Leading again starts with a full read; the new session may be seen before
                # the follower has noticed it lost the old one's leadership.
                reads = sum(
                    counter(running.metrics.full_reads, reason)
                    for reason in ("start", "reconnect", "checkpoint")
                )
                assert reads >= 2

            await assert_eventually(read_again, timeout=20)
            await running.ready()
    assert {2} == _ids(received)
    assert len(received) == 1
