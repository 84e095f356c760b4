"""Two Pulsar clusters sharing one BookKeeper (`tests/scan/shared_world.py`), extracted from
the real ZooKeeper and analysed with Spark.

Undeclared, nothing of the neighbour is proposed: its own namespace is `unknown_namespace`
and the replicated one is held back (`replicated_undeclared`), while our orphans outside the
replicated namespace are still proposed. Declared (`--shared-cluster`), the neighbour's
ledgers are referenced or `neighbour_owner`, and all our orphans are proposed. Named as
deleted (`--deleted-namespace`), the neighbour's namespace is proposed, and the run says the
option is risky. The policies the simulator writes are Pulsar's `Policies` JSON at
`NamespaceResources`' `/admin/policies/<tenant>/<ns>` (`TenantInfo` one level up). The
declared case runs on Oxia too, each cluster in a namespace of its own."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from devstack.oxia import OxiaServer, running_in_thread
from devstack.zookeeper import ZooKeeperServer
from services.core.shared_clusters import OXIA, ZOOKEEPER
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import AnalysisOutcome, run_analysis
from services.scan.extract.job import ExtractOutcome, run_extract
from services.scan.extract.units import ExtractSettings
from services.scan.preflight.sharing import check_replication
from services.scan.report.sections import DELETED_NAMESPACE
from tests.scan import shared_world as W
from tests.scan.cli_child import ROOT


def _settings(zk: ZooKeeperServer, **kw: Any) -> ExtractSettings:
    base = ExtractSettings(zookeeper=zk.address, cluster=W.OURS, chroot=W.OUR_CHROOT)
    return replace(base, zk_timeout_s=2.0, **kw)


def _config(world: W.World, extract: ExtractOutcome, **kw: Any) -> AnalyzeConfig:
    window = extract.started_ms - world.young_since_ms + 1
    return AnalyzeConfig(
        cluster=W.OURS,
        min_age=timedelta(milliseconds=window),
        allow_short_min_age=True,
        max_orphan_share=1.0,
        **kw,
    )


def _ledgers(spark: SparkSession, out: Path) -> dict[int, dict[str, Any]]:
    rows = spark.read.parquet(str(out / "findings" / "ledgers")).collect()
    return {r["ledger_id"]: r.asDict() for r in rows}


def _summary(out: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


@pytest.fixture
async def world(zk: ZooKeeperServer) -> W.World:
    return await W.write_world(zk)


async def _scan(
    spark: SparkSession, tmp: Path, world: W.World, settings: ExtractSettings, **kw: Any
) -> tuple[ExtractOutcome, AnalysisOutcome]:
    extract = await asyncio.to_thread(run_extract, spark, settings, tmp / "extract")
    config = _config(world, extract, **kw)
    analysis = await asyncio.to_thread(run_analysis, spark, tmp / "extract", tmp / "out", config)
    return extract, analysis


async def test_undeclared_neighbour_is_never_proposed(
    spark: SparkSession, tmp_path: Path, zk: ZooKeeperServer, world: W.World
) -> None:
    """Without --shared-cluster: the neighbour's own namespace is unknown here, its ledgers
    of the replicated namespace are held back (the OPEN current and cursor ledgers and the
    schema ledgers included); our orphans of our own namespace are still proposed. Then the
    same extract with --deleted-namespace east-1/default proposes that namespace's ledgers
    and names the risky option in the summary and the report's banner."""
    extract, outcome = await _scan(spark, tmp_path, world, _settings(zk))
    assert not outcome.verdict.refused, outcome.verdict.reasons
    found = _ledgers(spark, outcome.out_dir)
    theirs = world.their_ledgers()
    kinds = {i: found[i]["kind"] for i in theirs}
    expected = {
        i: "unknown_namespace" if ns == W.THEIR_OWN else "replicated_undeclared"
        for i, ns in theirs.items()
    }
    assert kinds == expected
    assert not [i for i in theirs if found[i]["deletable"]]
    states = {found[i]["state"] for i in theirs}
    roles = {found[i]["role"] for i in theirs}
    assert ("OPEN" in states, roles) == (True, {"data", "cursor", "schema"})
    ours = world.our_deletable()
    proposed = {i for i, row in found.items() if row["deletable"]}
    assert proposed == {i for i, ns in ours.items() if ns == W.OUR_OWN}
    assert {found[i]["kind"] for i, ns in ours.items() if ns == W.REPLICATED} <= {
        "replicated_undeclared"
    }

    shared = _summary(outcome.out_dir)["shared_bookkeeper"]
    unknown = [r for r in shared["held_apart"] if r["kind"] == "unknown_namespace"]
    their_own = [i for i, ns in theirs.items() if ns == W.THEIR_OWN]
    assert [(r["namespace"], r["ledgers"]) for r in unknown] == [(W.THEIR_OWN, len(their_own))]
    assert unknown[0]["bytes"] == sum(found[i]["size_bytes"] for i in their_own)
    assert shared["replicated_undeclared"] == {W.REPLICATED: [W.THEIRS]}
    warning = (
        f"namespaces {W.REPLICATED} replicate to {W.THEIRS}: if these share our BookKeeper, "
        "declare them with --shared-cluster"
    )
    summary = _summary(outcome.out_dir)
    assert warning in summary["warnings"]
    html = (outcome.out_dir / "report.html").read_text()
    assert "id='shared-bookkeeper'" in html
    assert W.THEIR_OWN in html

    deleted = _config(world, extract, deleted_namespaces=(W.THEIR_OWN,))
    named = await asyncio.to_thread(
        run_analysis, spark, tmp_path / "extract", tmp_path / "deleted", deleted
    )
    found = _ledgers(spark, named.out_dir)
    assert {i for i in their_own if found[i]["deletable"]} == set(their_own)
    summary = _summary(named.out_dir)
    assert DELETED_NAMESPACE in summary["risky_options"]
    assert summary["config"]["deleted_namespaces"] == [W.THEIR_OWN]
    banner = (named.out_dir / "report.html").read_text().split("id='risky'", 1)[1]
    assert DELETED_NAMESPACE in banner.split("</div>", 1)[0]


@pytest.fixture
def oxia_server(store: str) -> Iterator[OxiaServer | None]:
    """For the Oxia case: a server with a namespace per cluster."""
    if store != OXIA:
        yield None
        return
    with running_in_thread(namespaces=(W.OURS, W.THEIRS)) as server:
        yield server


@pytest.mark.parametrize(
    "store",
    # A second server and its clients on a loaded machine: more than the default bound.
    [ZOOKEEPER, pytest.param(OXIA, marks=pytest.mark.timeout(600))],
)
async def test_declared_neighbour_references_and_owns(
    spark: SparkSession,
    tmp_path: Path,
    zk: ZooKeeperServer,
    store: str,
    oxia_server: OxiaServer | None,
) -> None:
    """With the neighbour declared: what it references is referenced; its unreferenced
    ledgers whose owner only it has are `neighbour_owner`; ours are proposed, the replicated
    namespace's included (no undeclared replica left). On Oxia the same, with
    `--metadata-store oxia://.../west --shared-cluster east=oxia://.../east`."""
    if oxia_server is None:
        world = await W.write_world(zk)
        settings = _settings(zk, shared_clusters=(W.declared(zk),))
    else:
        address = oxia_server.address
        world = await W.write_oxia_world(address)
        settings = ExtractSettings(
            zookeeper="",
            cluster=W.OURS,
            metadata_store=W.oxia_store(address, W.OURS),
            shared_clusters=(W.declared_on_oxia(address),),
            zk_timeout_s=10.0,
        )
    _, outcome = await _scan(spark, tmp_path, world, settings)
    assert not outcome.verdict.refused, outcome.verdict.reasons
    found = _ledgers(spark, outcome.out_dir)
    our_mls = set(world.ours.managed_ledgers)
    their_orphans = {p.ledger_id for p in world.theirs.planted if p.ledger_id is not None}
    for ledger_id in world.their_ledgers():
        row = found[ledger_id]
        ledger = world.theirs.ledgers[ledger_id]
        if ledger_id not in their_orphans:
            assert (ledger_id, row["kind"]) == (ledger_id, "referenced")
        elif ledger.owner in our_mls:  # both clusters have the topic, neither lists it
            assert row["orphan_reason"] is not None
        else:
            assert (row["kind"], row["neighbour_cluster"]) == ("neighbour_owner", W.THEIRS)
    proposed = {i for i, row in found.items() if row["deletable"]}
    assert set(world.our_deletable()) <= proposed
    assert {i for i in proposed if i in world.theirs.ledgers} <= {
        i for i in their_orphans if world.theirs.ledgers[i].owner in our_mls
    }
    summary = _summary(outcome.out_dir)
    assert summary["shared_bookkeeper"]["declared"] == [W.THEIRS]
    assert not [w for w in summary["warnings"] if "replicate to" in w]


async def test_preflight_warns_of_undeclared_replication(
    zk: ZooKeeperServer, world: W.World
) -> None:
    """The pre-flight reads the policies and names the undeclared replication peer; declared,
    nothing to warn of."""
    warning = await check_replication(_settings(zk))
    assert warning == (
        f"namespaces {W.REPLICATED} replicate to {W.THEIRS}: if these share our BookKeeper, "
        "declare them with --shared-cluster"
    )
    assert await check_replication(_settings(zk, shared_clusters=(W.declared(zk),))) is None


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_reconcile_run_end_to_end_on_the_shared_world(
    zk: ZooKeeperServer, world: W.World, tmp_path: Path
) -> None:
    """`tombstone reconcile run` in a child process (its own Spark) on the undeclared world:
    exit 0, the pre-flight's warning on stderr, no ledger of the neighbour among the
    candidates, our orphans of our own namespace among them, and the report's section."""
    # The window must put every simulated znode on the old side: wait out a short one.
    time.sleep(max(0.0, (world.young_since_ms + 2000) / 1000 - time.time()))
    out = tmp_path / "out"
    args = ["reconcile", "run", "--zookeeper", zk.address, "--chroot", W.OUR_CHROOT]
    args += ["--cluster", W.OURS, "--out", str(out), "--master", "local[1]"]
    args += ["--min-age", "1s", "--allow-short-min-age", "--max-orphan-share", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        f"pre-flight: warning: namespaces {W.REPLICATED} replicate to {W.THEIRS}: if these "
        "share our BookKeeper, declare them with --shared-cluster"
    ) in done.stderr
    run = (out / "latest").resolve()
    candidates = set(pq.read_table(run / "candidates").column("ledger_id").to_pylist())
    ours = world.our_deletable()
    assert candidates == {i for i, ns in ours.items() if ns == W.OUR_OWN}
    assert not candidates & set(world.their_ledgers())
    assert "id='shared-bookkeeper'" in (run / "report.html").read_text()
