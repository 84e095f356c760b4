"""The reconciler's dry run and `--submit` on compacted-topic ledgers and delayed-delivery
bucket snapshots, end to end on the real parts (ZooKeeper, moto S3, the devstack broker, the
marker, the verifier and the deleter): the leaked ones are proposed and then deleted, the ones a
cursor property still names are kept.

The topic, its cursors and their ledgers are written as Pulsar writes them
(`devstack/demo_props.py`, `plant` then `move`):

- (a) a compacted ledger whose delete failed: `TwoPhaseCompactor.phaseTwo` created a new
  compacted ledger and moved the `__compaction` cursor's `CompactedTopicLedger` to it
  (`markDelete`), then `CompactedTopicImpl.newCompactedLedger`'s delete of the previous one
  failed;
- (b) a compaction crash leftover: a ledger `TwoPhaseCompactor.phaseTwo` created before its
  broker crashed, never named by a `markDelete` (apache/pulsar #12522);
- (c) a bucket snapshot (`BookkeeperBucketSnapshotStorage.createBucketSnapshot`) that a merge
  in `BucketDelayedDeliveryTracker` unlinked (its cursor property removed), whose delete
  (`Bucket.asyncDeleteBucketSnapshot`) then failed (fixed in 3.0.8 / 3.3.3);
- kept: the compacted ledger the cursor names now, and the bucket snapshots the subscription's
  cursor properties still name (the merged one and the one left alone).

Spark runs are slow: one extract and analysis (the dry run) and one submit, in one test.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from devstack.demo_props import PlantedProps, move, plant
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, OrphanPlan
from devstack.zookeeper import ZooKeeperServer
from services.metadata import BookKeeperLedgers, ZkMetadataStore
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import run_analysis
from services.scan.extract.job import run_extract
from services.scan.submit.send import read_candidates
from tests.deleter.stack import BUCKET, CLUSTER, create_topics
from tests.scan import sim
from tests.scan.submit_stack import submit_and_delete

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: A clean simulated cluster (no planted orphans of its own): every proposal is one of ours.
SPEC = ClusterSpec(
    seed=22,
    tenants=1,
    namespaces_per_tenant=1,
    topics_per_namespace=2,
    orphans=OrphanPlan(),
    bucket=BUCKET,
    cluster_name=CLUSTER,
)


async def _ledger_ids(zk: ZooKeeperServer) -> set[int]:
    async with ZkMetadataStore.connect(zk.address) as store:
        return {i async for i in BookKeeperLedgers(store).iter_ledger_ids()}


async def _server_now_ms(zk: ZooKeeperServer) -> int:
    """ZooKeeper's clock (znode ctimes are its): the ctime of a probe znode, then removed."""
    async with ZkMetadataStore.connect(zk.address) as store:
        path, stat = await store.create_sequential("/props-e2e-clock-")
        await store.delete(path, version=stat.version)
        return int(stat.ctime_ms)


def _leaks(planted: PlantedProps) -> dict[int, str]:
    """(a), (b), (c) and the class the reconciler must give each."""
    return {
        planted.compacted_old: "compacted_unreferenced",
        planted.leftover: "compacted_unreferenced",
        planted.buckets[1]: "bucket_unreferenced",
    }


def _kept(planted: PlantedProps) -> set[int]:
    assert planted.compacted_new is not None
    assert planted.merged_bucket is not None
    return {planted.compacted_new, planted.merged_bucket, planted.buckets[2]}


async def test_the_reconciler_proposes_and_deletes_the_leaks_and_keeps_the_named_ones(
    spark: SparkSession,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """The dry run proposes exactly (a), (b), (c) and deletes nothing; the submit deletes
    them, keeps every other ledger (the three still named ones too) and leaves no dead
    letter."""
    create_topics(broker)
    model = await sim.write(zk, s3, SPEC)
    planted = await plant(model, zk.address)
    await move(planted, model, zk.address)
    leaks = _leaks(planted)
    # Every ledger above was written before this instant; the window makes them old enough.
    await asyncio.sleep(0.01)
    boundary = await _server_now_ms(zk) + 1
    before = await _ledger_ids(zk)
    assert set(leaks) | _kept(planted) <= before

    # The dry run: extract and analyse, nothing submitted.
    extract = await asyncio.to_thread(
        run_extract, spark, sim.settings(zk, s3, SPEC), tmp_path / "extract"
    )
    config = AnalyzeConfig(
        cluster=sim.CLUSTER,
        min_age=timedelta(milliseconds=max(1, extract.started_ms - boundary)),
        allow_short_min_age=True,
        max_orphan_share=1.0,
    )
    analysis = await asyncio.to_thread(
        run_analysis, spark, tmp_path / "extract", tmp_path / "out", config
    )
    assert analysis.verdict.reasons == ()
    candidates = await asyncio.to_thread(read_candidates, analysis.out_dir)
    assert {int(c["ledger_id"]): str(c["kind"]) for c in candidates} == leaks
    assert await _ledger_ids(zk) == before

    # The submit: the marker, the verifier and the deleter act on the candidates.
    report, status = await submit_and_delete(
        candidates, zk, s3, broker, property_ledger_min_age=timedelta(0)
    )
    after = await _ledger_ids(zk)
    assert (report.errors, report.not_marked, report.skipped) == ([], [], [])
    assert after == before - set(leaks)
    assert _kept(planted) <= after
    assert status.dead_letter_backlog == 0
