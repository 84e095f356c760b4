"""The follower against the real ZooKeeper and the devstack broker: owner writes shaped as an
unmodified broker makes them become OBSERVED PDLIs on the system topic, read back with the
real pulsar-client."""

from __future__ import annotations

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.marker.follower.index import ledger_ids
from tests.follower.live import counter, intents, running_follower
from tests.helpers import assert_eventually
from tests.marker.builders import (
    CURSOR,
    CURSOR_PATH,
    ML_NAME,
    ML_PATH,
    SCHEMA_ID,
    SCHEMA_PATH,
    TOPIC,
    UID_LSB,
    UID_MSB,
    cursor_bytes,
    ledger,
    ml_bytes,
    schema_bytes,
)
from tests.marker.live import create_system_topic, live_marker, read_topic, zk_store
from tests.store_kinds import StoreKind
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

L, OFF = _pd.LEDGER, _pd.OFFLOAD_LEDGER
ML, CUR, SCH = _pd.MANAGED_LEDGER, _pd.MANAGED_CURSOR, _pd.SCHEMA_STORAGE


async def test_trims_offload_cursor_switch_and_schema_versions(
    store_kind: StoreKind, broker: PulsarBrokerProcess
) -> None:
    """Each change as Pulsar writes it, before its (unretried) deletes:
    `ManagedLedgerImpl.internalTrimLedgers` writes the shorter list, and in the same write
    flags `bookkeeperDeleted` on an offloaded ledger whose BookKeeper copy it then deletes;
    `ManagedCursorImpl.switchToNewLedger` writes the new `cursorsLedgerId` and deletes the
    old ledger without closing it; `BookkeeperSchemaStorage` drops a version from the
    locator. Every ledger that left gets one PDLI per tier it had, with the fence token the
    version that no longer lists it, source OBSERVED, and the offload context of its upload."""
    create_system_topic(broker)
    async with store_kind.open() as writer:
        before = ml_bytes(
            ledger(1),
            ledger(2, offload="complete"),
            ledger(3, offload="bk_deleted"),
            ledger(4, offload="complete"),
            ledger(5),
        )
        ml = await writer.create(ML_PATH, before, make_parents=True)
        cursor = await writer.create(CURSOR_PATH, cursor_bytes(20))
        schema = await writer.create(SCHEMA_PATH, schema_bytes(30, 31), make_parents=True)
        async with running_follower(store_kind, broker) as running:
            await running.ready()
            after = ml_bytes(ledger(4, offload="bk_deleted"), ledger(5))
            # The version that no longer lists them: 1 on ZooKeeper, the shard's next id on
            # Oxia.
            ml_v = await writer.set(ML_PATH, after, version=ml.version)
            cursor_v = await writer.set(CURSOR_PATH, cursor_bytes(21), version=cursor.version)
            schema_v = await writer.set(SCHEMA_PATH, schema_bytes(31), version=schema.version)
            received = await read_topic(broker, 7)
    if store_kind.oxia is None:
        assert (ml_v, cursor_v, schema_v) == (1, 1, 1)
    assert {
        (1, L, ML, ML_NAME, ml_v),
        (2, L, ML, ML_NAME, ml_v),
        (2, OFF, ML, ML_NAME, ml_v),
        (3, OFF, ML, ML_NAME, ml_v),
        (4, L, ML, ML_NAME, ml_v),
        (20, L, CUR, CURSOR, cursor_v),
        (30, L, SCH, SCHEMA_ID, schema_v),
    } == intents(received)
    assert len(received) == 7
    for r in received:
        pdli = r.pdli
        assert (pdli.source, pdli.marker_id, pdli.cluster) == (
            _pd.OBSERVED,
            "follower-test",
            "test",
        )
        if pdli.component != SCH:
            assert (pdli.topic_name, pdli.managed_ledger_name) == (TOPIC, ML_NAME)
        if pdli.ledger_type == OFF:
            ctx = pdli.offload_context
            assert (ctx.uuid_msb, ctx.uuid_lsb, ctx.driver_name) == (UID_MSB, UID_LSB, "aws-s3")
            assert ctx.driver_metadata["bucket"] == "offload-bucket"


async def test_unsubscribe_and_a_topic_deleted_then_created_again(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """Unsubscribing removes the cursor znode (`MetaStoreImpl.asyncRemoveCursor`, then
    `ManagedCursorImpl.asyncDeleteCursorLedger`); deleting the topic removes its ML znode
    (`MetaStoreImpl.removeManagedLedger`). Every ledger they referenced gets a PDLI with
    fence token 0 (no version of a re-created znode lists them). The topic created again
    under the same name is a new owner: its ledgers get PDLIs only when it unlinks them."""
    create_system_topic(broker)
    async with zk_store(zk) as writer:
        await writer.create(
            ML_PATH, ml_bytes(ledger(1), ledger(2, offload="complete")), make_parents=True
        )
        await writer.create(CURSOR_PATH, cursor_bytes(20))
        async with running_follower(zk.address, broker) as running:
            await running.ready()
            await writer.delete(CURSOR_PATH, version=0)
            await writer.delete(ML_PATH, version=0)
            await writer.create(ML_PATH, ml_bytes(ledger(100), ledger(101)))

            async def recreated_seen() -> None:
                # A ledger added and dropped between two reads of its owner is never seen
                # (docs/follower.md): the trim below waits until the new list was read.
                entry = running.follower.index.get(ML_PATH)
                assert entry is not None
                assert 100 in ledger_ids(entry)

            await assert_eventually(recreated_seen)
            await writer.set(ML_PATH, ml_bytes(ledger(101)), version=0)
            received = await read_topic(broker, 5)
    assert {
        (20, L, CUR, CURSOR, 0),
        (1, L, ML, ML_NAME, 0),
        (2, L, ML, ML_NAME, 0),
        (2, OFF, ML, ML_NAME, 0),
        (100, L, ML, ML_NAME, 1),
    } == intents(received)
    assert len(received) == 5


async def test_the_markers_own_unlinks_are_not_sent_twice(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """A trim through the marker (intent before unlink) is seen by the follower of the same
    marker: the marker's record of its own writes shows the intents are on the topic, so it
    sends none and counts them as duplicates. A broker-style trim right after is sent."""
    create_system_topic(broker)
    async with live_marker(zk, broker) as (marker, writer, stub):
        await writer.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 5))), make_parents=True)
        async with running_follower(zk.address, broker, own_writes=marker.own_writes) as running:
            await running.ready()
            request = _mk.MarkLedgersRequest(
                component=ML, managed_ledger_name=ML_NAME, ledger_ids=[1, 2]
            )
            assert (await stub.MarkLedgers(request)).written
            assert {(1, L, ML, ML_NAME, 1), (2, L, ML, ML_NAME, 1)} == intents(
                await read_topic(broker, 2)
            )

            async def counted() -> None:
                assert counter(running.metrics.duplicates, "marker") == 2

            await assert_eventually(counted)
            await writer.set(ML_PATH, ml_bytes(ledger(4)), version=1)
            received = await read_topic(broker, 1)
    assert {(3, L, ML, ML_NAME, 2)} == intents(received)
    assert received[0].pdli.source == _pd.OBSERVED
