"""`--submit` end to end: extract and analyse a simulated cluster, submit the candidates to a
real marker (gRPC), and let the verifier and deleter act: exactly the planted deletable orphans
end deleted from the metadata store (ZooKeeper or Oxia) and S3, and nothing else changes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, OrphanPlan
from services.metadata import BookKeeperLedgers
from services.scan.submit.send import read_candidates, scan_started_ms
from tests.deleter.stack import BUCKET, CLUSTER, create_topics, write_cluster
from tests.deleter_e2e.checks import objects_in_s3
from tests.scan import sim
from tests.scan.submit_stack import submit_and_delete
from tests.store_kinds import StoreKind

SPEC = ClusterSpec(
    seed=21,
    tenants=1,
    namespaces_per_tenant=2,
    topics_per_namespace=3,
    # Another cluster's objects in the shared bucket included: excluded, so they stay.
    orphans=OrphanPlan.some(1),
    bucket=BUCKET,
    cluster_name=CLUSTER,
)


async def _state(where: StoreKind) -> tuple[set[int], dict[str, tuple[bytes, int]]]:
    """Ledger ids in BookKeeper, and data and version of every ML, cursor and locator znode."""
    async with where.open() as store:
        ids = {i async for i in BookKeeperLedgers(store).iter_ledger_ids()}
        nodes: dict[str, tuple[bytes, int]] = {}

        async def walk(path: str) -> None:
            for child in await store.get_children(path):
                node = await store.get(f"{path}/{child}")
                nodes[f"{path}/{child}"] = (node.data, node.version)
                await walk(f"{path}/{child}")

        for root in ("/managed-ledgers", "/schemas"):
            await walk(root)
    return ids, nodes


# Spark, a broker and the services; on Oxia a second server and its clients: on a loaded
# machine more than the default bound.
@pytest.mark.timeout(600)
async def test_submit_deletes_exactly_the_planted_orphans(
    spark: SparkSession,
    store_kind: StoreKind,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """Planted deletable ledgers leave the metadata store, the abandoned uploads leave S3;
    every other ledger, object (another cluster's in the shared bucket too), ML, cursor and
    schema record is as before (same data, same version). On both stores: the marker's
    RECONCILER marks read the owners there, and the verifier re-verifies every intent there
    before the deleter's conditional deletes. The intents carry the scan's start as
    `seen_at_ms`, which the ledgers they name pass (they were created before it)."""
    create_topics(broker)
    model = await write_cluster(store_kind, s3, SPEC)
    ledgers_before, nodes_before = await _state(store_kind)
    objects_before = objects_in_s3(s3)
    settings = sim.settings_on(store_kind, s3, SPEC)
    scanned = await sim.extract_and_analyze(spark, tmp_path, model, settings)
    assert scanned.analysis.verdict.reasons == ()
    assert scanned.analysis.summary["other_clusters"]["objects"] > 0
    candidates = await asyncio.to_thread(read_candidates, scanned.analysis.out_dir)
    seen_at = scan_started_ms(scanned.analysis.out_dir)
    assert seen_at == scanned.analysis.summary["scan"]["started_ms"] > 0
    report, status = await submit_and_delete(candidates, store_kind, s3, broker, seen_at_ms=seen_at)
    gone_ledgers = {p.ledger_id for p in model.planted if p.deletable and not p.object_keys}
    gone_keys = {k for p in model.planted if p.deletable for k in p.object_keys}
    ledgers_after, nodes_after = await _state(store_kind)
    assert (report.errors, report.not_marked, report.skipped) == ([], [], [])
    assert ledgers_before - gone_ledgers == ledgers_after
    assert objects_before - gone_keys == objects_in_s3(s3)
    assert nodes_before == nodes_after
    assert (len(gone_ledgers), len(gone_keys), status.dead_letter_backlog) == (5, 2, 0)
