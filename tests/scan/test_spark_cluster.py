"""The reconciler on a real Spark standalone cluster (a master and two workers, each its own
JVM, on loopback), submitted with `spark-submit --py-files dist/tombstone-spark.zip`: the
findings equal local mode's on the same simulated cluster, and the extract tasks ran on the
workers' executors (read from the Spark event log)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, OrphanPlan
from devstack.spark_cluster import QUICK_JVM, SparkStandalone, spark_home
from devstack.zookeeper import ZooKeeperServer
from scripts.dist_spark import build
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import run_analysis
from services.scan.extract.job import JOB_GROUP, run_extract
from tests.scan import sim

#: Hang guards only: a master, two workers, a submitted driver and a local run share two
#: cores with the suite's other test workers.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: Every ledger the simulator writes here is older than this by the time the scans start.
MIN_AGE = timedelta(seconds=1)
#: Columns that depend on when each run started, not on what it found.
RUN_DEPENDENT = {"age_ms"}
#: summary.json parts that describe findings (the rest names the scan and its times).
SUMMARY_FINDINGS = (
    "refused",
    "refusal_reasons",
    "orphan_share",
    "counts",
    "candidates",
    "reclaimable_bytes_total",
    "dormant_topics",
    "inactive_cursors",
    "other_clusters",
    "unattributed_objects",
)


def _spec() -> ClusterSpec:
    """One of every orphan and look-alike (another cluster's objects, excluded, among them)
    except a young ledger, which hangs on the age window: the run proposes candidates."""
    orphans = replace(OrphanPlan.some(1), young=0)
    return ClusterSpec(
        seed=17, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3, orphans=orphans
    )


def _run_local(spark: SparkSession, settings: Any, out: Path) -> int:
    """Local mode, in this process: extract then analyse; returns the number of units."""
    extract = run_extract(spark, settings, out / "extract")
    config = AnalyzeConfig(
        cluster=sim.CLUSTER, min_age=MIN_AGE, allow_short_min_age=True, max_orphan_share=1.0
    )
    run_analysis(spark, out / "extract", out, config)
    # A namespace unit reports two manifest rows (`managed_ledgers` and `cursors`).
    return sum(
        1
        for row in extract.manifest
        if not str(row["task_id"]).startswith("list:") and row["kind"] != "cursors"
    )


def _submit(
    cluster: SparkStandalone, zk: ZooKeeperServer, s3: S3Server, tmp: Path
) -> subprocess.CompletedProcess[str]:
    """`spark-submit` (client mode) of the packaged driver: `reconcile run --master submit`."""
    archive, driver = build(tmp / "dist")
    s3_config = s3.client_config()
    events = tmp / "events"
    events.mkdir()
    conf = {
        "spark.executor.memory": "512m",
        "spark.executor.cores": "1",
        "spark.cores.max": "2",
        # The first job waits for both executors, so each worker gets its share of tasks.
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": QUICK_JVM,
        "spark.executor.extraJavaOptions": QUICK_JVM,
        "spark.ui.enabled": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.sql.shuffle.partitions": "2",
        # A few dozen rows: adaptive execution's re-planning after every shuffle (each query
        # stage a job of its own, scheduled on the executors) and compiling generated code
        # cost more than they save, as for the suite's local sessions (tests/spark_conf/).
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        cluster.master_url,
        "--deploy-mode",
        "client",
        "--driver-memory",
        "1g",
        *(arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")),
        "--py-files",
        str(archive),
        str(driver),
        "reconcile",
        "run",
        "--master",
        "submit",
        "--zookeeper",
        zk.address,
        "--cluster",
        sim.CLUSTER,
        "--bucket",
        _spec().bucket,
        "--s3-endpoint",
        s3_config["endpoint_url"],
        "--s3-region",
        s3_config["region_name"],
        "--zk-timeout",
        "10s",
        "--min-age",
        f"{int(MIN_AGE.total_seconds())}s",
        "--allow-short-min-age",
        "--max-orphan-share",
        "1.0",
        "--out",
        str(tmp / "cluster"),
    ]
    env = cluster.env(
        PYSPARK_PYTHON=sys.executable,
        TOMBSTONE_S3_ACCESS_KEY_ID=s3_config["aws_access_key_id"],
        TOMBSTONE_S3_SECRET_ACCESS_KEY=s3_config["aws_secret_access_key"],
    )
    # Only the zip carries the project: run from an empty directory, no PYTHONPATH.
    env.pop("PYTHONPATH", None)
    workdir = tmp / "submit"
    workdir.mkdir()
    return subprocess.run(
        command, cwd=workdir, env=env, capture_output=True, text=True, timeout=480
    )


def _rows(spark: SparkSession, path: Path) -> list[tuple[Any, ...]]:
    frame = spark.read.parquet(str(path))
    columns = sorted(c for c in frame.columns if c not in RUN_DEPENDENT)
    return sorted(
        (tuple(json.dumps(row[c], sort_keys=True, default=str) for c in columns))
        for row in frame.select(columns).collect()
    )


def _summary(out: Path) -> dict[str, Any]:
    summary = json.loads((out / "summary.json").read_text())
    return {key: summary[key] for key in SUMMARY_FINDINGS}


def _runs_the_units(rdd_names: set[str]) -> bool:
    """A stage of the unit indexes (`spark.range`: a parallel collection) fed to the Python
    task body (`mapInArrow`, whose RDD is named after the plan: `MapInArrow run_partition…`)."""
    arrow = any(name.startswith("MapInArrow") for name in rdd_names)
    return arrow and "ParallelCollectionRDD" in rdd_names


def _extract_task_placement(events: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """From the event log: the executors added (id → host) and, per successful extract task,
    (executor id, host). The extract tasks are the first job of the `tombstone-extract` group,
    its stage over the units (a range of unit indexes → `mapInArrow`); later jobs of the
    group read the cached rows."""
    (log,) = list(events.iterdir())
    # Spark 4 writes a directory of rolled files (`eventlog_v2_<app>/events_<n>_<app>`),
    # beside them an empty `appstatus_<app>` marker.
    rolled = [f for f in log.iterdir() if f.name.startswith("events_")] if log.is_dir() else []
    files = sorted(rolled, key=_roll_index) if log.is_dir() else [log]
    executors: dict[str, str] = {}
    extract_stages: set[int] | None = None
    tasks: list[tuple[str, str]] = []
    for line in (line for f in files for line in f.read_text().splitlines() if line):
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerExecutorAdded":
            executors[event["Executor ID"]] = event["Executor Info"]["Host"]
        elif kind == "SparkListenerJobStart" and extract_stages is None:
            if (event.get("Properties") or {}).get("spark.jobGroup.id") == JOB_GROUP:
                extract_stages = {
                    stage["Stage ID"]
                    for stage in event["Stage Infos"]
                    if _runs_the_units({rdd["Name"] for rdd in stage["RDD Info"]})
                }
        elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in (extract_stages or ()):
            info = event["Task Info"]
            if event["Task End Reason"]["Reason"] == "Success":
                tasks.append((info["Executor ID"], info["Host"]))
    return executors, tasks


def _roll_index(path: Path) -> int:
    parts = path.name.split("_")
    return int(parts[1]) if parts[0] == "events" and parts[1].isdigit() else -1


async def test_cluster_findings_equal_local_mode_and_extract_runs_on_workers(
    spark: SparkSession, zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """spark-submit to a master and two workers finds what local mode finds on the same
    seeded cluster (findings, candidates, counts and summary), the extract's tasks, one per
    unit, all ran on the two workers' executors (none in the driver), and no Spark process is
    left afterwards."""
    spec = _spec()
    model = await sim.write(zk, s3, spec)
    await asyncio.sleep(MIN_AGE.total_seconds() + 0.1)
    settings = sim.settings(zk, s3, spec)
    cluster = SparkStandalone(tmp_path / "spark", workers=2, worker_cores=1, worker_memory="1g")
    # The daemons start while local mode runs (both mostly wait).
    starting = asyncio.to_thread(cluster.start)
    try:
        units, _ = await asyncio.gather(
            asyncio.to_thread(_run_local, spark, settings, tmp_path / "local"), starting
        )
        result = await asyncio.to_thread(_submit, cluster, zk, s3, tmp_path)
        state = await asyncio.to_thread(cluster.state)
    finally:
        await asyncio.to_thread(cluster.stop)
    assert result.returncode == 0, result.stderr[-4000:]

    # `run` writes into a run folder of its --out; `latest` names it once complete.
    local, remote = tmp_path / "local", (tmp_path / "cluster" / "latest").resolve()
    for table in ("findings/ledgers", "findings/objects", "candidates", "counts_by_kind"):
        assert _rows(spark, remote / table) == _rows(spark, local / table), table
    assert _summary(remote) == _summary(local)
    deletable = {p.ledger_id for p in model.planted if p.deletable and not p.object_keys}
    candidates = spark.read.parquet(str(remote / "candidates"))
    proposed = {r["ledger_id"] for r in candidates.filter("ledger_type = 'LEDGER'").collect()}
    assert proposed == deletable

    executors, tasks = _extract_task_placement(tmp_path / "events")
    workers = {w["host"] for w in state["workers"]}
    assert (len(executors), "driver" in executors, set(executors.values()) <= workers) == (
        2,
        False,
        True,
    )
    assert (len(tasks), {e for e, _ in tasks} <= set(executors)) == (units, True)
    assert [app["state"] for app in state["completedapps"]] == ["FINISHED"]
    assert _spark_processes(tmp_path) == []


def _spark_processes(tmp: Path) -> list[str]:
    """Command lines of live JVMs started for this test: daemons name its directory, executors
    run inside a worker's work directory."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if "java" in cmdline and (str(tmp) in cmdline or cwd.startswith(str(tmp))):
            found.append(cmdline)
    return found
