"""End to end with an unmodified broker's property writes: the real ZooKeeper, moto S3, the
devstack broker, the verifier (trusting the follower's key) and the deleter. A compaction
moves `CompactedTopicLedger` and a bucket merge drops a bucket snapshot, and the broker's own
deletes of the ledgers they no longer name fail: the follower's signed OBSERVED PDLIs get
them deleted, and the ledgers still named are kept."""

from __future__ import annotations

from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore, cursor_path
from tests.deleter.stack import (
    CLUSTER,
    create_topics,
    pulsar_config,
    run_deleter_until_drained,
    running_verifier,
)
from tests.deleter_e2e.checks import ledgers_in_zookeeper
from tests.follower.live import counter, running_follower
from tests.follower.property_znodes import (
    COMPACTION,
    bucket_cursor,
    bucket_ledger_metadata,
    compacted_ledger_metadata,
    compaction_cursor,
)
from tests.helpers import assert_eventually, signing_pair
from tests.verifier.world import ML, TOPIC, World, data_meta

SIGNER, TRUSTED = signing_pair("follower-1")
SUBSCRIPTION = "delayed sub"
SUB_CURSOR = "delayed+sub"
"""The subscription's cursor znode name (`Codec.encode`)."""


async def test_a_compaction_and_a_bucket_merge_end_deleted(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """`TwoPhaseCompactor` replaces compacted ledger 40 with 41 on the closed `__compaction`
    cursor; `BucketDelayedDeliveryTracker` merges the buckets of snapshots 50 and 51 into 52.
    The broker's deletes of 40, 50 and 51 fail (`CompactedTopicImpl`,
    `BookkeeperBucketSnapshotStorage` do not retry). Once the deleter drained the follower's
    PDLIs, 40, 50 and 51 are gone; 41, 52 and the topic's data ledger remain."""
    create_topics(broker)
    async with ZkMetadataStore.connect(zk.address) as store:
        world = World(store)
        await world.bookkeeper_root()
        await world.ml([20])
        await world.ledger(20, data_meta())
        for ledger_id in (40, 41):
            await world.ledger(ledger_id, compacted_ledger_metadata(TOPIC))
        for ledger_id, (start, end) in ((50, (1, 5)), (51, (6, 9)), (52, (1, 9))):
            await world.ledger(ledger_id, bucket_ledger_metadata(TOPIC, SUBSCRIPTION, start, end))
        compaction, sub = cursor_path(ML, COMPACTION), cursor_path(ML, SUB_CURSOR)
        await store.create(compaction, compaction_cursor(40))
        await store.create(sub, bucket_cursor((1, 5, 50), (6, 9, 51)))
        async with (
            running_verifier(
                zk, s3, trusted_keys=TRUSTED, property_ledger_min_age=timedelta(0)
            ) as verifier,
            running_follower(
                zk.address, broker, signer=SIGNER, pulsar=pulsar_config(broker), cluster=CLUSTER
            ) as running,
        ):
            await running.ready()
            await store.set(compaction, compaction_cursor(41), version=0)
            await store.set(sub, bucket_cursor((1, 9, 52)), version=0)

            async def all_published() -> None:
                assert counter(running.metrics.pdlis, "ledger") == 3

            await assert_eventually(all_published, timeout=20)
            status = await run_deleter_until_drained(zk, s3, broker, verifier)
    assert status.dead_letter_backlog == 0
    assert set() == await ledgers_in_zookeeper(zk, {40, 50, 51})
    assert {20, 41, 52} == await ledgers_in_zookeeper(zk, {20, 41, 52})
