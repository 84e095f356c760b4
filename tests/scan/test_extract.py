"""Extract from a simulated cluster (real ZooKeeper, moto S3), then analyse: the findings are
exactly the planted orphans, for both ledger id layouts; a failed task stops every deletion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, IdLayout, OrphanPlan
from devstack.zookeeper import ZooKeeperServer
from services.scan.extract import manifest_counts
from services.scan.extract_plan import Unit
from tests.scan import sim


def _spec(layout: IdLayout) -> ClusterSpec:
    return ClusterSpec(
        seed=11,
        tenants=1,
        namespaces_per_tenant=2,
        topics_per_namespace=3,
        id_layout=layout,
        orphans=OrphanPlan.some(1),
    )


@pytest.mark.parametrize("layout", [IdLayout.SHORT, IdLayout.LONG])
async def test_findings_are_exactly_the_planted_orphans(
    spark: SparkSession, zk: ZooKeeperServer, s3: S3Server, tmp_path: Path, layout: IdLayout
) -> None:
    """Every planted orphan and look-alike is found as its kind, the deletable findings are
    exactly the planted deletable ones, the only refusal is the other cluster's objects, and
    the manifest counts every znode and object the simulator wrote."""
    spec = _spec(layout)
    model = await sim.write(zk, s3, spec)
    scanned = await sim.extract_and_analyze(spark, tmp_path, model, sim.settings(zk, s3, spec))
    ledgers = sim.findings(spark, scanned.analysis.out_dir, "ledgers", "ledger_id")
    objects = sim.findings(spark, scanned.analysis.out_dir, "objects", "key")
    planted_ledgers = {
        p.ledger_id: sim.LEDGER_KINDS[p.kind] for p in model.planted if p.kind in sim.LEDGER_KINDS
    }
    planted_objects = {
        key: sim.OBJECT_KINDS[p.kind]
        for p in model.planted
        if p.kind in sim.OBJECT_KINDS
        for key in p.object_keys
    }
    assert planted_ledgers == {i: ledgers[i][0] for i in planted_ledgers}
    assert planted_objects == {k: objects[k][0] for k in planted_objects}
    deletable_planted = {p.ledger_id for p in model.planted if p.deletable and not p.object_keys}
    deletable_planted_keys = {k for p in model.planted if p.deletable for k in p.object_keys}
    assert deletable_planted == {i for i, (_, ok) in ledgers.items() if ok}
    assert deletable_planted_keys == {k for k, (_, ok) in objects.items() if ok}
    reasons = scanned.analysis.verdict.reasons
    assert (len(reasons), "another cluster" in reasons[0]) == (1, True)
    _assert_counts(scanned)


def _assert_counts(scanned: sim.Scanned) -> None:
    """The manifest's row counts per table equal what the model wrote; every task is ok."""
    model = scanned.model
    counts = manifest_counts(scanned.extract.manifest)
    expected_rows = {
        "bk_ledgers": len(list(model.bookkeeper_ledgers())),
        "managed_ledgers": len(model.managed_ledgers),
        "cursors": len(model.cursors),
        "schemas": len(model.schemas),
        "offload_objects": len(model.objects),
    }
    assert (expected_rows, {"ok": len(scanned.extract.manifest)}) == (
        counts["rows"],
        counts["tasks"],
    )


async def test_zookeeper_stopped_mid_scan_fails_tasks_and_refuses(
    spark: SparkSession, zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """ZooKeeper stops after the driver listed the units: the ZooKeeper tasks report
    `failed` with the error in the manifest, and the run refuses with zero candidates."""
    spec = ClusterSpec(seed=12, tenants=1, orphans=OrphanPlan(unlisted_data=1, deleted_topic=1))
    model = await sim.write(zk, s3, spec)

    def stop_zookeeper(_units: list[Unit]) -> None:
        zk.stop()

    scanned = await sim.extract_and_analyze(
        spark, tmp_path, model, sim.settings(zk, s3, spec), after_listing=stop_zookeeper
    )
    failed = {r["kind"] for r in scanned.extract.problems if r["status"] == "failed"}
    summary = json.loads((scanned.analysis.out_dir / "summary.json").read_text())
    written = spark.read.parquet(str(scanned.analysis.out_dir / "candidates")).count()
    assert failed == {"bk_ledgers", "managed_ledgers", "cursors", "schemas"}
    assert (summary["refused"], summary["candidates"]["count"], written) == (True, 0, 0)
    assert any("StoreUnavailable" in r for r in summary["refusal_reasons"])
