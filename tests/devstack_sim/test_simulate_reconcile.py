"""`devstack simulate` defaults give a clean reconcile: the opt-in orphan kinds, and the
`tombstone reconcile run` command it prints, run for real against what it seeded."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from devstack import s3 as s3_launcher
from devstack.cli import devstack, simulate
from devstack.reconcile_command import SEEDED_MIN_AGE_TEXT
from devstack.s3 import S3Server
from devstack.simulator.generate import build_model
from devstack.simulator.options import SPEC_OPTION_NAMES, parse_orphans, spec_from_options
from devstack.simulator.spec import OrphanPlan
from devstack.zookeeper import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]
#: The age window the end-to-end run below uses instead of the printed minute.
SHORT_MIN_AGE, SHORT_MIN_AGE_TEXT = timedelta(seconds=3), "3s"


def test_orphans_default_leaves_out_the_opt_in_kinds() -> None:
    """`N` plants N of every kind but other-cluster objects and young ledgers."""
    plan = parse_orphans("2")
    assert (plan.other_cluster_objects, plan.young) == (0, 0)
    assert plan.total() == 2 * 8


def test_orphans_names_kinds_and_all() -> None:
    """KIND=N sets one kind (dashes or underscores), all=N every kind, later items win."""
    assert parse_orphans("0,other-cluster-objects=2") == OrphanPlan(other_cluster_objects=2)
    assert parse_orphans("all=1") == OrphanPlan.some(1)
    assert parse_orphans("all=1,young=0,unlisted_data=3").young == 0
    assert parse_orphans("all=1,young=0,unlisted_data=3").unlisted_data == 3


@pytest.mark.parametrize("value", ["x", "young=-1", "ghosts=1", "1,=2"])
def test_a_bad_orphans_value_is_a_usage_error(value: str) -> None:
    """A bad --orphans item is exit 2 naming the item; nothing is contacted."""
    result = CliRunner().invoke(
        devstack, ["simulate", "--zookeeper", "127.0.0.1:1", "--orphans", value]
    )
    assert result.exit_code == 2, result.output
    assert "--orphans" in result.output


def test_simulate_help_says_which_kinds_are_opt_in() -> None:
    result = CliRunner().invoke(devstack, ["simulate", "--help"])
    assert "opt-in young and" in " ".join(result.output.split())
    assert "other-cluster-objects" in result.output


def _printed_command(output: str) -> tuple[dict[str, str], list[str]]:
    """The environment and argv of the printed `tombstone reconcile run` line."""
    (line,) = [x for x in output.splitlines() if "tombstone reconcile run" in x]
    words = shlex.split(line)
    env = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "tombstone"
    return env, words[1:]


def test_simulate_prints_the_reconcile_command(zk: ZooKeeperServer, s3: S3Server) -> None:
    """The command names this devstack's ZooKeeper, endpoint, bucket and cluster, the devstack
    credentials as TOMBSTONE_S3_* variables, and the short window with its reason."""
    args = ["simulate", "--zookeeper", zk.address, "--s3-endpoint", s3.endpoint]
    result = CliRunner().invoke(devstack, [*args, "--tenants", "1", "--cluster-name", "c1"])
    assert result.exit_code == 0, result.output
    env, argv = _printed_command(result.output)
    assert env == {
        "TOMBSTONE_S3_ACCESS_KEY_ID": s3_launcher.ACCESS_KEY,
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": s3_launcher.SECRET_KEY,
        "TOMBSTONE_S3_REGION": s3_launcher.REGION,
    }
    text = " ".join(argv)
    for part in (
        f"--zookeeper {zk.address}",
        f"--s3-endpoint {s3.endpoint} --bucket pulsar-offload",
        "--cluster c1",
        "--min-age 1m --allow-short-min-age",
    ):
        assert part in text, text
    assert "--submit" not in text
    assert "planted data is minutes old" in result.output
    assert "refuses" not in result.output


def test_simulate_says_when_opt_in_kinds_change_the_run(zk: ZooKeeperServer, s3: S3Server) -> None:
    """With other-cluster objects and young ledgers asked for, the hint says the run refuses
    and when the young ones stop being young."""
    args = ["simulate", "--zookeeper", zk.address, "--s3-endpoint", s3.endpoint, "--tenants"]
    args += ["1", "--orphans", "1,other-cluster-objects=1,young=1"]
    result = CliRunner().invoke(devstack, args)
    assert result.exit_code == 0, result.output
    assert "other-cluster-objects    1" in result.output
    assert "that run refuses" in result.output
    assert "Young ledgers were planted" in result.output


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_printed_command_proposes_exactly_the_planted_orphans(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """The documented path, as a new operator runs it: `devstack simulate` with its defaults,
    then the printed command once the seed is older than the command's age window. The run
    is not refused and its candidates are exactly the planted deletable orphans (ledgers and
    offloaded objects).

    The printed window is a minute (checked above); here it is cut to SHORT_MIN_AGE, the one
    word of the command changed, so the test waits seconds rather than a minute. Nothing the
    defaults plant is meant to be young, so the same ledgers and objects are past either
    window and the classification is the one the minute-old seed gets."""
    base = ["simulate", "--zookeeper", zk.address, "--s3-endpoint", s3.endpoint]
    result = CliRunner().invoke(devstack, base)
    seeded = time.monotonic()
    assert result.exit_code == 0, result.output
    env, argv = _printed_command(result.output)

    params = simulate.make_context("simulate", base[1:]).params
    model = build_model(spec_from_options({n: params[n] for n in SPEC_OPTION_NAMES}))
    planted_ledgers = {p.ledger_id for p in model.planted if p.deletable and not p.object_keys}
    planted_objects = {p.ledger_id for p in model.planted if p.deletable and p.object_keys}

    window = argv.index("--min-age") + 1
    assert argv[window] == SEEDED_MIN_AGE_TEXT
    argv[window] = SHORT_MIN_AGE_TEXT
    # Znode ctimes and LastModified are the servers' clocks: wait for the window to pass.
    time.sleep(max(0.0, SHORT_MIN_AGE.total_seconds() + 1 - (time.monotonic() - seeded)))
    run = subprocess.run(
        [sys.executable, "-m", "services.cli", *argv],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = tmp_path / "reconcile-out" / "latest"  # runs are versioned under --out
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["refused"], summary["refusal_reasons"]) == (False, [])
    rows = pq.read_table(out / "candidates").to_pylist()
    ledgers = {r["ledger_id"] for r in rows if r["ledger_type"] == "LEDGER"}
    objects = {r["ledger_id"] for r in rows if r["ledger_type"] == "OFFLOAD_LEDGER"}
    assert (ledgers, objects) == (planted_ledgers, planted_objects)
    assert f"{len(rows)} deletion candidates" in run.stdout
