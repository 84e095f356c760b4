"""The follower against the real ZooKeeper and the devstack broker: cursor znodes whose
property references move or disappear, written as an unmodified broker writes them
(`tests/follower/property_znodes.py` names the Pulsar classes), become OBSERVED PDLIs of
component COMPACTED_LEDGER or DELAYED_INDEX_BUCKET; references still named, and a write of
an active cursor that merely omits its properties, never do."""

from __future__ import annotations

from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.marker.follower.checkpoint import CheckpointStore
from services.marker.follower.index import VERSION, compacted_of
from services.marker.follower.metrics import FollowerMetrics
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic import decode_intent
from tests.follower.live import Running, counter, follower_indexing, intents, running_follower
from tests.follower.property_znodes import (
    COMPACTION,
    COMPACTION_PATH,
    bucket_cursor,
    compaction_cursor,
)
from tests.helpers import assert_eventually
from tests.marker.builders import (
    CURSOR,
    CURSOR_PATH,
    ML_NAME,
    ML_PATH,
    TOPIC,
    ledger,
    ml_bytes,
)
from tests.marker.fakes import FakePublisher
from tests.marker.live import create_system_topic, read_topic, zk_store
from tombstone.v1 import pending_delete_pb2 as _pd

L = _pd.LEDGER
ML, CUR = _pd.MANAGED_LEDGER, _pd.MANAGED_CURSOR
COMPACTED, BUCKET = _pd.COMPACTED_LEDGER, _pd.DELAYED_INDEX_BUCKET
QUICK = timedelta(milliseconds=200)


async def _indexed(running: Running, path: str, version: int) -> None:
    """Wait until the follower's index holds `path` at `version` (its write was read)."""

    async def read() -> None:
        entry = running.follower.index.get(path)
        assert entry is not None
        assert entry[VERSION] == version

    await assert_eventually(read, timeout=10)


async def _checkpointed(writer: ZkMetadataStore, path: str, version: int) -> None:
    """Wait until the checkpoint holds `path` at `version`."""

    async def holds() -> None:
        index = await CheckpointStore(writer).load()
        assert index is not None
        entry = index.get(path)
        assert entry is not None
        assert entry[VERSION] == version

    await assert_eventually(holds, timeout=10)


async def test_a_compaction_and_a_bucket_merge_unlink_what_the_properties_named(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """`TwoPhaseCompactor` marks the new compacted ledger 41 and the closed `__compaction`
    cursor's znode names it instead of 40 (`CompactedTopicImpl.newCompactedLedger` then
    deletes 40). `BucketDelayedDeliveryTracker` merges buckets 50 and 51 into 53: the new
    bucket's property is put, then the merged ones removed (two writes), before
    `BookkeeperBucketSnapshotStorage` deletes their ledgers. 40, 50 and 51 get one PDLI each,
    fenced at the version that no longer names them; bucket 52, still named, gets none."""
    create_system_topic(broker)
    async with zk_store(zk) as writer:
        await writer.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        await writer.create(COMPACTION_PATH, compaction_cursor(40))
        await writer.create(CURSOR_PATH, bucket_cursor((1, 5, 50), (6, 9, 51), (10, 12, 52)))
        async with running_follower(zk.address, broker) as running:
            await running.ready()
            await writer.set(COMPACTION_PATH, compaction_cursor(41), version=0)
            merged = bucket_cursor((1, 5, 50), (6, 9, 51), (10, 12, 52), (1, 9, 53))
            await writer.set(CURSOR_PATH, merged, version=0)
            await writer.set(CURSOR_PATH, bucket_cursor((10, 12, 52), (1, 9, 53)), version=1)
            received = await read_topic(broker, 3)
    assert {
        (40, L, COMPACTED, COMPACTION, 1),
        (50, L, BUCKET, CURSOR, 2),
        (51, L, BUCKET, CURSOR, 2),
    } == intents(received)
    assert len(received) == 3
    for r in received:
        pdli = r.pdli
        assert (pdli.source, pdli.topic_name, pdli.managed_ledger_name) == (
            _pd.OBSERVED,
            TOPIC,
            ML_NAME,
        )
        assert not pdli.HasField("offload_context")


async def test_an_active_compaction_cursor_omitting_its_property_unlinks_nothing(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """`ManagedCursorImpl.switchToNewLedger` of a release that wrote only the new
    `cursorsLedgerId`: the znode stops naming compacted ledger 40 while the cursor ledger
    90 holds the live reference. Nothing is sent. The cursor later closes
    (`persistPositionWhenClosing`) naming 42, compacted meanwhile: 40 is unlinked then, with
    the cursor ledger 90, both fenced at that version."""
    create_system_topic(broker)
    async with zk_store(zk) as writer:
        await writer.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        await writer.create(COMPACTION_PATH, compaction_cursor(40))
        async with running_follower(zk.address, broker) as running:
            await running.ready()
            active = compaction_cursor(None, cursor_ledger=90)
            await writer.set(COMPACTION_PATH, active, version=0)
            await _indexed(running, COMPACTION_PATH, 1)
            entry = running.follower.index.get(COMPACTION_PATH)
            assert entry is not None
            assert compacted_of(entry) == 40
            await writer.set(COMPACTION_PATH, compaction_cursor(42), version=1)
            received = await read_topic(broker, 2)
    assert {(40, L, COMPACTED, COMPACTION, 2), (90, L, CUR, COMPACTION, 2)} == intents(received)
    assert len(received) == 2


async def test_an_unsubscribe_and_a_topic_deletion_unlink_every_property_reference(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """Unsubscribing removes the cursor znode (`MetaStoreImpl.asyncRemoveCursor`) with its
    bucket properties; deleting the topic removes its cursors, the `__compaction` one
    included, then its ML znode (`ManagedLedgerImpl.asyncDelete`), leaving the compacted
    ledger behind. Every reference gets a PDLI with fence token 0, as a deleted cursor's
    cursor ledger does."""
    create_system_topic(broker)
    async with zk_store(zk) as writer:
        await writer.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        await writer.create(COMPACTION_PATH, compaction_cursor(40))
        await writer.create(CURSOR_PATH, bucket_cursor((1, 5, 50), (6, 9, 51), cursor_ledger=20))
        async with running_follower(zk.address, broker) as running:
            await running.ready()
            await writer.delete(CURSOR_PATH, version=0)
            await writer.delete(COMPACTION_PATH, version=0)
            await writer.delete(ML_PATH, version=0)
            received = await read_topic(broker, 5)
    assert {
        (20, L, CUR, CURSOR, 0),
        (50, L, BUCKET, CURSOR, 0),
        (51, L, BUCKET, CURSOR, 0),
        (40, L, COMPACTED, COMPACTION, 0),
        (1, L, ML, ML_NAME, 0),
    } == intents(received)
    assert len(received) == 5


async def test_a_restart_between_the_writes_and_the_emit_misses_none(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """A follower checkpoints the `__compaction` cursor while it is active (its znode omits
    compacted ledger 40; the index keeps it) and is killed. While none runs, the cursor
    closes naming 41 and a bucket merge drops bucket 50. The next follower diffs its read
    against the checkpoint: 40 and 50 are sent (with the cursor ledger 90), 51 is not."""
    create_system_topic(broker)
    async with zk_store(zk) as writer:
        await writer.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        await writer.create(COMPACTION_PATH, compaction_cursor(40))
        await writer.create(CURSOR_PATH, bucket_cursor((1, 5, 50), (6, 9, 51)))
        async with running_follower(zk.address, broker, checkpoint_interval=QUICK) as first:
            await first.ready()
            active = compaction_cursor(None, cursor_ledger=90)
            await writer.set(COMPACTION_PATH, active, version=0)
            await _checkpointed(writer, COMPACTION_PATH, 1)
            first.kill()
        await writer.set(COMPACTION_PATH, compaction_cursor(41), version=1)
        await writer.set(CURSOR_PATH, bucket_cursor((6, 9, 51)), version=0)
        async with running_follower(zk.address, broker, marker_id="second") as second:
            await second.ready()
            received = await read_topic(broker, 3)
            assert counter(second.metrics.full_reads, "checkpoint") == 1
            assert counter(second.metrics.duplicates, "replay") == 3
    assert {
        (40, L, COMPACTED, COMPACTION, 2),
        (90, L, CUR, COMPACTION, 2),
        (50, L, BUCKET, CURSOR, 1),
    } == intents(received)
    assert len(received) == 3


async def test_a_refused_property_pdli_holds_the_whole_change_back(zk: ZooKeeperServer) -> None:
    """The closing `__compaction` cursor's write unlinks its cursor ledger 90 and, naming 41,
    compacted ledger 40: one change, two components. The first publish refuses the
    COMPACTED_LEDGER intent: the entry stays at the version before, the znode is read again
    and both intents are sent again (the cursor ledger's twice: the same intent), then the
    entry moves (the publisher port's fake, which refuses on demand)."""
    publisher = FakePublisher()
    publisher.refuse = lambda m: (
        publisher.calls == 1 and decode_intent(m.payload, m.properties).component == COMPACTED
    )
    metrics = FollowerMetrics()
    async with zk_store(zk) as store:
        await store.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        await store.create(COMPACTION_PATH, compaction_cursor(40, cursor_ledger=90))
        async with follower_indexing(store, publisher, metrics, COMPACTION_PATH) as follower:
            await store.set(COMPACTION_PATH, compaction_cursor(41), version=0)

            async def sent_again() -> None:
                sent = [(p.ledger_id, p.component, p.fence_token) for p in publisher.pdlis]
                assert sent == [(90, CUR, 1), (90, CUR, 1), (40, COMPACTED, 1)]

            await assert_eventually(sent_again, timeout=15)
            entry = follower.index.get(COMPACTION_PATH)
            assert entry is not None
            assert (entry[VERSION], compacted_of(entry)) == (1, 41)
            assert counter(metrics.publish_failures) == 1
