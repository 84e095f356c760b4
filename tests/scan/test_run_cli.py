"""`tombstone reconcile analyze` in a child process (its own Spark): a finished run gets its
own folder, `latest` and the link to the run before it; SIGINT leaves a marked partial run,
exit 130 and one line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from pyspark.sql import SparkSession

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec
from devstack.zookeeper import ZooKeeperServer
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import run_analysis
from services.scan.cli.runs import LATEST, complete_run, start_run, update_latest
from services.scan.report.history import INCOMPLETE
from services.scan.schema import extract_from_rows, write_extract
from tests.scan import planted as P
from tests.scan import report_fixture as R
from tests.scan import sim
from tests.scan.cli_child import ROOT, spawn_cli
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc

#: Each test runs a whole Spark application in a child (a minute or more on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
#: Generous bound for a child Spark run on a loaded 2-core machine (a hang guard only).
TIMEOUT_S = 600
#: Set in the child's environment, inherited by its JVM and workers: how they are found.
MARK = "SCAN_TEST_RUN_OUT"


@pytest.fixture(scope="module")
def extract_dir(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("extract")
    write_extract(extract_from_rows(spark, P.planted_rows()), path)
    return path


def out_with_a_previous_run(tmp_path: Path) -> Path:
    """--out holding one complete earlier run (`latest` on it)."""
    out = tmp_path / "out"
    previous = out / R.PREVIOUS
    previous.mkdir(parents=True)
    (previous / "summary.json").write_text(json.dumps(R.summary()))
    R.write_candidates(previous, [101, 102])
    update_latest(out)
    return out


def analyze(extract_dir: Path, out: Path) -> subprocess.Popen[str]:
    args = ["reconcile", "analyze", "--extract", str(extract_dir), "--out", str(out)]
    args += ["--cluster", P.CLUSTER, "--max-orphan-share", "1", "--master", "local[1]"]
    return subprocess.Popen(
        [sys.executable, "-m", "services.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {MARK: str(out)},
        # Its own process group, so the SIGINT below goes to the group as a terminal's
        # Ctrl-C does, without reaching pytest.
        start_new_session=True,
    )


def new_runs(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if p.name not in (R.PREVIOUS, LATEST)]


def test_a_finished_run_is_versioned_and_linked_to_the_previous(
    extract_dir: Path, tmp_path: Path
) -> None:
    """Exit 0; the run folder and report path printed; `latest` moved to the new run, whose
    summary names the previous run and whose report compares with it."""
    out = out_with_a_previous_run(tmp_path)
    process = analyze(extract_dir, out)
    stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    (run,) = new_runs(out)
    summary = json.loads((run / "summary.json").read_text())
    page = (run / "report.html").read_text()
    assert process.returncode == 0, stderr[-3000:]
    assert [f"run folder: {run}" in stdout, f"report: {run / 'report.html'}" in stdout] == [
        True,
        True,
    ]
    assert (os.readlink(out / LATEST), (run / INCOMPLETE).exists()) == (run.name, False)
    assert (summary["run_id"], summary["previous_run_id"]) == (run.name, R.PREVIOUS)
    assert f"Previous run: <code>{R.PREVIOUS}</code>" in page


def test_sigint_during_the_analysis_leaves_a_marked_partial_run(
    extract_dir: Path, tmp_path: Path
) -> None:
    """Interrupted once the analysis writes its findings: exit 130, the last line of stderr
    and the only one about the interrupt names the partial folder, no Python or Java stack;
    the folder keeps INCOMPLETE and `latest` stays on the previous run; Spark is gone."""
    out = out_with_a_previous_run(tmp_path)
    process = analyze(extract_dir, out)
    deadline = time.monotonic() + TIMEOUT_S
    while not any((p / "findings").exists() for p in new_runs(out)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=TIMEOUT_S)
    (run,) = new_runs(out)
    lines = [line for line in stderr.splitlines() if line.strip()]
    about = [line for line in lines if "interrupt" in line.lower()]
    expected = f"interrupted: partial run left in {run} (marked INCOMPLETE)"
    assert (process.returncode, about, lines[-1]) == (130, [expected], expected), stderr
    assert [
        "Traceback" in stderr,
        any(line.startswith("\tat ") for line in lines),
        "Exception" in stderr,
    ] == [False, False, False], stderr
    assert ((run / INCOMPLETE).is_file(), os.readlink(out / LATEST)) == (True, R.PREVIOUS)
    assert f"run folder: {run}" in stdout
    # Spark stopped: no process carrying the child's mark (its JVM, Python workers) stays.
    while _marked(out):
        assert time.monotonic() < deadline, _marked(out)
        time.sleep(0.2)


def _marked(out: Path) -> list[int]:
    """Processes whose environment carries the mark `analyze` gave the child for `out`."""
    mark = f"{MARK}={out}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if mark in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("command", ["run", "extract"])
async def test_sigint_during_the_extract_leaves_a_marked_partial_run(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path, command: str
) -> None:
    """Interrupted while the extract's tasks run (their Python workers are up): exit 130, one
    line, no stack, the JVM and workers gone. `run` keeps INCOMPLETE in its run folder and
    makes no `latest`; `extract` alone names its --out as incomplete."""
    spec = ClusterSpec(seed=43, tenants=1, namespaces_per_tenant=2)
    await sim.write(zk, s3, spec)
    config = s3.client_config()
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOMBSTONE_", "AWS_"))}
    env |= {
        "TOMBSTONE_S3_ACCESS_KEY_ID": config["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": config["aws_secret_access_key"],
        MARK: str(out),
    }
    args = ["reconcile", command, "--zookeeper", zk.address, "--cluster", sim.CLUSTER]
    args += ["--s3-endpoint", config["endpoint_url"], "--bucket", spec.bucket]
    args += ["--out", str(out), "--master", "local[1]"]
    process = await spawn_cli(args, env, own_session=True)
    deadline = time.monotonic() + TIMEOUT_S
    # The extract is the only step with Python workers: one up means its tasks are running.
    while not [p for p in _marked(out) if _is_python_worker(p)]:
        assert process.returncode is None, await process.communicate()
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    out_bytes, err = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
    stderr = err.decode()
    lines = [line for line in stderr.splitlines() if line.strip()]
    if command == "run":
        (run,) = list(out.iterdir())
        extract_dir = run / "extract"
        expected = f"interrupted: partial run left in {run} (marked INCOMPLETE)"
        assert ((run / INCOMPLETE).is_file(), (out / LATEST).exists()) == (True, False)
    else:
        extract_dir = out
        expected = f"interrupted: the extract in {out} is incomplete"
    about = [line for line in lines if "interrupt" in line.lower()]
    assert (process.returncode, about, lines[-1]) == (130, [expected], expected), stderr
    assert ["Traceback" in stderr, "Exception" in stderr] == [False, False], stderr
    # Cut during the extract: its closing line ("extract <scan id> in DIR: ...") never came.
    assert f" in {extract_dir}: " not in out_bytes.decode()
    while _marked(out):
        assert time.monotonic() < deadline, _marked(out)
        await asyncio.sleep(0.2)


def _is_python_worker(pid: int) -> bool:
    """A Python process started by the JVM (pyspark's daemon or one of its workers)."""
    try:
        argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return Path(argv[0].decode()).name.startswith("python") and b"pyspark" in b" ".join(argv)


class HeldMarker(_mk_grpc.MarkerServicer):
    """A marker that takes MarkLedgers calls and never answers them (the submit is under
    way when the command is interrupted)."""

    def __init__(self) -> None:
        self.called = asyncio.Event()

    async def MarkLedgers(self, request: Any, context: Any) -> Any:
        self.called.set()
        await asyncio.Event().wait()


async def test_sigint_during_the_submit_leaves_a_run_that_says_so(
    extract_dir: Path, tmp_path: Path
) -> None:
    """`analyze --submit --yes`, interrupted while a MarkLedgers call is in flight: exit 130,
    one line, INCOMPLETE kept; the summary no longer claims a dry run and the report says the
    submit was interrupted."""
    marker = HeldMarker()
    server = grpc.aio.server()
    _mk_grpc.add_MarkerServicer_to_server(marker, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    out = tmp_path / "out"
    args = ["reconcile", "analyze", "--extract", str(extract_dir), "--out", str(out)]
    args += ["--cluster", P.CLUSTER, "--max-orphan-share", "1", "--master", "local[1]"]
    args += ["--submit", "--yes", "--marker-address", f"127.0.0.1:{port}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    # The held call must outlast the wait for it (the default deadline is 10 s).
    env |= {"TOMBSTONE_MARKER_TIMEOUT": str(TIMEOUT_S), MARK: str(out)}
    try:
        process = await spawn_cli(args, env, own_session=True)
        await asyncio.wait_for(marker.called.wait(), TIMEOUT_S)
        os.killpg(process.pid, signal.SIGINT)
        _, err = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
    finally:
        await server.stop(None)
    stderr = err.decode()
    (run,) = list(out.iterdir())
    lines = [line for line in stderr.splitlines() if line.strip()]
    expected = f"interrupted: partial run left in {run} (marked INCOMPLETE)"
    assert (process.returncode, lines[-1]) == (130, expected), stderr
    assert ["Traceback" in stderr, "Exception" in stderr] == [False, False], stderr
    summary = json.loads((run / "summary.json").read_text())
    page = (run / "report.html").read_text()
    assert ((run / INCOMPLETE).is_file(), summary["dry_run"]) == (True, False)
    assert "Submit started but left no record" in page


class RecordingMarker(_mk_grpc.MarkerServicer):
    """A marker that answers every MarkLedgers call at once, keeping what it was sent."""

    def __init__(self) -> None:
        self.sent: set[tuple[str, int]] = set()

    async def MarkLedgers(self, request: Any, context: Any) -> Any:
        self.sent |= {("LEDGER", i) for i in request.ledger_ids}
        self.sent |= {("OFFLOAD_LEDGER", r.ledger_id) for r in request.reconciler_ledgers}
        return _mk.MarkLedgersResponse()


async def test_submit_with_a_plan_sends_only_what_is_still_planned(
    spark: SparkSession, extract_dir: Path, tmp_path: Path
) -> None:
    """A dry run of the planted extract is the plan. Since then ledger 100 was deleted, 102
    was listed again and 110 became an orphan: `analyze --submit --yes --plan` sends the
    other planned candidates, no more, and says what it left out and why."""
    out = tmp_path / "out"
    plan = start_run(out)
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    await asyncio.to_thread(run_analysis, spark, extract_dir, plan.path, config, run_ids=plan.ids())
    complete_run(plan)
    rows = P.planted_rows()
    rows["bk_ledgers"] = [r for r in rows["bk_ledgers"] if r["ledger_id"] != 100]
    rows["bk_ledgers"].append(P.data(110, P.GONE))
    rows["ml_ledgers"].append(P.listed(P.LIVE, 102, 3))
    now_dir = tmp_path / "extract-now"
    await asyncio.to_thread(write_extract, extract_from_rows(spark, rows), now_dir)
    marker = RecordingMarker()
    server = grpc.aio.server()
    _mk_grpc.add_MarkerServicer_to_server(marker, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    args = ["reconcile", "analyze", "--extract", str(now_dir), "--out", str(out)]
    args += ["--cluster", P.CLUSTER, "--max-orphan-share", "1", "--master", "local[1]"]
    args += ["--submit", "--yes", "--plan", str(plan.path)]
    args += ["--marker-address", f"127.0.0.1:{port}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    try:
        process = await spawn_cli(args, env)
        stdout, stderr = await asyncio.wait_for(process.communicate(), TIMEOUT_S)
    finally:
        await server.stop(None)
    assert process.returncode == 0, stderr.decode()[-3000:]
    (run,) = [p for p in out.iterdir() if p.name not in (plan.run_id, LATEST)]
    record = json.loads((run / "submitted.json").read_text())
    planned = {(t, i) for t, i, ok in _expected_candidates() if ok}
    # An upload naming no managed ledger has no owner to mark it under: skipped, as always.
    skipped = {
        (s["candidate"]["ledger_type"], s["candidate"]["ledger_id"]) for s in record["skipped"]
    }
    assert (marker.sent | skipped, marker.sent & skipped) == (
        planned - {("LEDGER", 100), ("LEDGER", 102)},
        set(),
    )
    assert {t for t, _ in skipped} <= {"OFFLOAD_LEDGER"}
    assert [(n["ledger_id"], n["kind"]) for n in record["no_longer_candidates"]] == [
        (100, "gone"),
        (102, "referenced"),
    ]
    assert (record["plan"]["sent"], record["plan"]["outside_plan"]) == (len(planned) - 2, 1)
    assert (
        f"plan {plan.run_id}: {len(planned) - 2} of {len(planned)} planned candidates still "
        "proposed; 2 no longer candidates (not sent); 1 new candidates outside the plan "
        "(not sent)" in stdout.decode()
    )
    assert os.readlink(out / LATEST) == run.name


def _expected_candidates() -> list[tuple[str, int, bool]]:
    """(ledger type, ledger id, proposed) of the planted extract: deletable ledgers, and the
    uploads whose objects are all deletable."""
    ledgers = [("LEDGER", i, ok) for i, _, _, ok in P.EXPECTED_LEDGERS]
    uploads = [("OFFLOAD_LEDGER", 31, True), ("OFFLOAD_LEDGER", P.LONG + 500, True)]
    return ledgers + uploads
