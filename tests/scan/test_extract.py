"""Extract from a simulated cluster (real ZooKeeper, moto S3), then analyse: the findings are
exactly the planted orphans, for both ledger id layouts; a failed task stops every deletion."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from devstack.oxia import OxiaServer, running_in_thread
from devstack.s3 import S3Server
from devstack.simulator import (
    ClusterSpec,
    IdLayout,
    OrphanKind,
    OrphanPlan,
    PathWriter,
    legacy_spec,
)
from devstack.simulator.generate import namespaces
from devstack.simulator.s3 import open_object_stores
from devstack.simulator.writer import write_cluster
from devstack.zookeeper import ZooKeeperServer
from services.core.shared_clusters import OXIA, ZOOKEEPER, StoreUrl
from services.metadata.oxia import OxiaMetadataStore
from services.metadata.paths import LedgerLayout, LedgerPaths
from services.scan.extract.job import manifest_counts
from services.scan.extract.units import Unit
from services.scan.preflight.checks import source_problems
from services.scan.report.write import REPORT_FILE
from tests.scan import sim
from tests.split_stores import PULSAR_CHROOT, split_stores, write_split_cluster


def _spec(layout: IdLayout) -> ClusterSpec:
    return ClusterSpec(
        seed=11,
        tenants=1,
        namespaces_per_tenant=2,
        topics_per_namespace=3,
        id_layout=layout,
        orphans=OrphanPlan.some(1),
    )


def _legacy() -> ClusterSpec:
    """The simulator's legacy profile: OPEN cursor ledgers, pre-2.2 ledgers, 2.1 contexts,
    pre-2.10 objects, LZ4 znodes, a long LAYOUT with older ledgers at long paths
    (`LongHierarchicalLedgerManager`) and newer ones at hybrid paths (Pulsar >= 2.10's
    `PulsarLedgerManager`)."""
    return legacy_spec(seed=11, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3)


def _flat() -> ClusterSpec:
    """A flat LAYOUT (BookKeeper < 4.7) upgraded to Pulsar >= 2.10: older ledgers `L%010d`
    under the root (`FlatLedgerManager`), newer ones at hybrid paths."""
    return replace(_spec(IdLayout.SHORT), layout=LedgerLayout.FLAT, path_writer=PathWriter.MIXED)


#: Where the Oxia server's version ids start: beyond 32 bits, as on a shard that has taken
#: billions of writes (Oxia's version ids are one counter per shard).
HIGH_VERSION_ID = 2**33 + 7


@pytest.fixture
def oxia_server(store: str) -> Iterator[OxiaServer | None]:
    """A three-shard devstack Oxia server for the Oxia runs, its version ids beyond 32 bits
    (its thread's loop is stopped from a synchronous teardown, outside the test's loop)."""
    if store != OXIA:
        yield None
        return
    with running_in_thread(shards=3, first_version_id=HIGH_VERSION_ID) as server:
        yield server


@pytest.mark.parametrize(
    ("spec", "store"),
    [
        (_spec(IdLayout.SHORT), ZOOKEEPER),
        (_spec(IdLayout.LONG), ZOOKEEPER),
        (_legacy(), ZOOKEEPER),
        (_flat(), ZOOKEEPER),
        # A second server and its client on a loaded machine: more than the default bound.
        pytest.param(_spec(IdLayout.SHORT), OXIA, marks=pytest.mark.timeout(600)),
    ],
    ids=["short-ids", "long-ids", "legacy", "flat-layout", "short-ids-oxia"],
)
async def test_findings_are_exactly_the_planted_orphans(
    spark: SparkSession,
    zk: ZooKeeperServer,
    s3: S3Server,
    tmp_path: Path,
    spec: ClusterSpec,
    store: str,
    oxia_server: OxiaServer | None,
) -> None:
    """Every planted orphan, look-alike and legacy artifact is found as its kind (open
    orphans older than the window included), the deletable findings are exactly the planted
    deletable ones, the other cluster's objects are excluded (reported, not a refusal), and
    the manifest counts every znode and object the simulator wrote, at whatever path its
    writer put it. On Oxia (Pulsar's and BookKeeper's metadata in one namespace of a
    three-shard server whose version ids are beyond 32 bits) the same, with the pre-flight
    clean, no zxid anywhere, and every version recorded as the store has it."""
    if oxia_server is not None:
        await _on_oxia(spark, zk, s3, tmp_path, spec, oxia_server.address)
        return
    model = await sim.write(zk, s3, spec)
    scanned = await sim.extract_and_analyze(spark, tmp_path, model, sim.settings(zk, s3, spec))
    _assert_planted_found(spark, scanned)


async def _on_oxia(
    spark: SparkSession,
    zk: ZooKeeperServer,
    s3: S3Server,
    tmp_path: Path,
    spec: ClusterSpec,
    address: str,
) -> None:
    """Extract, analyse and report a simulated cluster written to the Oxia at `address`."""
    async with (
        OxiaMetadataStore.connect(address, session_timeout=10.0, request_timeout=10.0) as writer,
        open_object_stores(s3.client_config()) as objects,
    ):
        model = await write_cluster(spec, store=writer, s3_client=objects)
    url = StoreUrl(OXIA, address, "")
    settings = sim.settings_at("", s3, spec, metadata_store=url)
    assert await source_problems(settings, []) == []
    scanned = await sim.extract_and_analyze(spark, tmp_path, model, settings)
    _assert_planted_found(spark, scanned)
    assert (None, set()) == (
        scanned.extract.zxid,
        {row["zxid"] for row in scanned.extract.manifest} - {None},
    )
    report = (scanned.analysis.out_dir / REPORT_FILE).read_text()
    assert "No transaction id was recorded (Oxia has none" in report
    await _assert_versions_beyond_32_bits(spark, scanned, address)


async def _assert_versions_beyond_32_bits(
    spark: SparkSession, scanned: sim.Scanned, address: str
) -> None:
    """Every record version the extract wrote is the 64-bit one Oxia gave, and the LEDGER
    candidates carry the version each ledger's key has in the store."""
    run = scanned.extract.run_dir
    tables = {"bk_ledgers": "znode_version", "managed_ledgers": "znode_version"}
    tables |= {"cursors": "znode_version", "schemas": "locator_version"}
    for table, column in tables.items():
        frame = spark.read.parquet(str(run / table))
        assert dict(frame.dtypes)[column] == "bigint"
        assert frame.agg({column: "min"}).collect()[0][0] >= HIGH_VERSION_ID, table
    candidates = spark.read.parquet(str(scanned.analysis.out_dir / "candidates"))
    proposed = {
        row["ledger_id"]: row["znode_version"]
        for row in candidates.filter("ledger_type = 'LEDGER'").collect()
    }
    assert proposed
    async with OxiaMetadataStore.connect(
        address, session_timeout=10.0, request_timeout=10.0
    ) as store:
        paths = LedgerPaths()
        stored = {i: (await store.get(paths.ledger_path(i))).version for i in proposed}
    assert proposed == stored
    assert min(stored.values()) > 2**31


async def test_bookkeeper_metadata_in_a_chroot_of_its_own(
    spark: SparkSession, zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """Pulsar's metadata under /pulsar and BookKeeper's ledgers root under /bk
    (`--chroot /pulsar --bookkeeper-metadata zk:<servers>/bk`): the BookKeeper units are
    listed and read in BookKeeper's store, everything else in Pulsar's, and the findings are
    exactly the planted orphans, as with one store."""
    spec = _spec(IdLayout.SHORT)
    model = await write_split_cluster(spec, zk.address, s3.client_config())
    settings = sim.settings(
        zk, s3, spec, chroot=PULSAR_CHROOT, bookkeeper_store=split_stores(zk.address).bookkeeper
    )
    scanned = await sim.extract_and_analyze(spark, tmp_path, model, settings)
    _assert_planted_found(spark, scanned)


def _assert_planted_found(spark: SparkSession, scanned: sim.Scanned) -> None:
    """The findings are exactly the planted orphans and look-alikes, the other cluster's
    objects are excluded, and the manifest counts everything written."""
    model = scanned.model
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
    foreign = [p for p in model.planted if p.kind == OrphanKind.OTHER_CLUSTER_OBJECTS]
    by_cluster = scanned.analysis.summary["other_clusters"]["by_cluster"]
    assert scanned.analysis.verdict.reasons == ()
    assert {r["cluster_name"]: r["objects"] for r in by_cluster} == {
        p.note: len(p.object_keys) for p in foreign
    }
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
        # One policies znode per namespace (`NamespaceResources`), all V2.
        "namespaces": len(namespaces(model.spec)),
    }
    assert (expected_rows, {"ok": len(scanned.extract.manifest)}) == (
        counts["rows"],
        counts["tasks"],
    )


async def test_zookeeper_stopped_mid_scan_fails_tasks_and_refuses(
    spark: SparkSession, zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """ZooKeeper stops after the driver listed the units: the ZooKeeper tasks report
    `failed` with the error in the manifest (the namespace policies' task too: it reads the
    same store), and the run refuses with zero candidates."""
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
    assert failed == {"bk_ledgers", "managed_ledgers", "cursors", "schemas", "namespaces"}
    assert (summary["refused"], summary["candidates"]["count"], written) == (True, 0, 0)
    assert any("StoreUnavailable" in r for r in summary["refusal_reasons"])
