"""`tombstone reconcile extract` in a child process (its own Spark): the run directory holds
every table, the summary line names the row counts, and nothing else reaches the terminal
but our own log lines on stderr (Spark's and the JVM's output goes to its log file);
`--no-head-objects` only with its acknowledgement, then recorded in the extract and warned of."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec
from devstack.zookeeper import ZooKeeperServer
from services.scan.analysis.clusters import HEAD_UNRECORDED
from services.scan.cli.options import warn_risky_extract
from services.scan.cli.reconcile import reconcile
from services.scan.schema import TABLES
from tests.scan import sim
from tests.scan.cli_child import spawn_cli

#: A hang guard for a child Spark run (about 30 s alone; several times that on a machine
#: shared with other workers and runs), inside the tests' own timeout.
CHILD_TIMEOUT_S = 540
pytestmark = pytest.mark.timeout(600)


async def _extract(
    zk: ZooKeeperServer, s3: S3Server, spec: ClusterSpec, out: Path, *extra: str
) -> tuple[int | None, str, str]:
    """Run `tombstone reconcile extract` as a child process; (exit code, stdout, stderr)."""
    config = s3.client_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOMBSTONE_", "AWS_"))}
    env |= {
        "TOMBSTONE_S3_ACCESS_KEY_ID": config["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": config["aws_secret_access_key"],
    }
    args = ["reconcile", "extract", "--zookeeper", zk.address, "--cluster", sim.CLUSTER]
    args += ["--s3-endpoint", config["endpoint_url"], "--bucket", spec.bucket]
    args += ["--out", str(out), "--master", "local[1]", *extra]
    process = await spawn_cli(args, env)
    out_bytes, err_bytes = await asyncio.wait_for(process.communicate(), CHILD_TIMEOUT_S)
    return process.returncode, out_bytes.decode(), err_bytes.decode()


async def test_extract_command_writes_every_table(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """Exit 0, one Parquet dataset per table, and the counts of the written cluster; the
    objects were read with HEAD, and the extract says so."""
    spec = ClusterSpec(seed=41, tenants=1, namespaces_per_tenant=1)
    model = await sim.write(zk, s3, spec)
    code, text, errors = await _extract(zk, s3, spec, tmp_path / "run")
    tables = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert (code, tables) == (0, sorted(TABLES)), (text + errors)[-2000:]
    # stdout: the result line only; stderr: our structured log lines (JSON off a terminal).
    assert len(text.splitlines()) == 1, text
    assert f"bk_ledgers {len(list(model.bookkeeper_ledgers()))}," in text
    foreign = [line for line in errors.splitlines() if not line.startswith("{")]
    assert foreign == [], errors[-2000:]
    events = {json.loads(line)["event"] for line in errors.splitlines()}
    assert {"spark output", "extract done"} <= events
    run = pq.read_table(tmp_path / "run" / "scan_run").to_pylist()
    assert [r["objects_headed"] for r in run] == [True]


async def test_acknowledged_no_head_objects_is_recorded_and_warned(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """With the acknowledgement: a warning line, no object names a cluster, and scan_run
    records that the objects were not read with HEAD."""
    spec = ClusterSpec(seed=42, tenants=1, namespaces_per_tenant=1)
    await sim.write(zk, s3, spec)
    code, text, errors = await _extract(
        zk, s3, spec, tmp_path / "run", "--no-head-objects", "--accept-unattributed-objects"
    )
    assert code == 0, (text + errors)[-2000:]
    warnings = [line for line in errors.splitlines() if line.startswith("WARNING: --no-head")]
    objects = pq.read_table(tmp_path / "run" / "offload_objects").to_pylist()
    run = pq.read_table(tmp_path / "run" / "scan_run").to_pylist()
    assert (len(warnings), [r["objects_headed"] for r in run]) == (1, [False])
    assert (len(objects) > 0, {o["cluster_name"] for o in objects}) == (True, {None})


@pytest.mark.parametrize("command", ["extract", "run"])
def test_no_head_objects_without_acknowledgement_is_a_usage_error(
    tmp_path: Path, command: str
) -> None:
    """Exit 2 before any work, the error one line naming the acknowledgement option, and
    no output folder."""
    args = [command, "--zookeeper", "127.0.0.1:1", "--out", str(tmp_path / "o")]
    args += ["--cluster", "c1", "--bucket", "b", "--no-head-objects"]
    result = CliRunner().invoke(reconcile, args)
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert (result.exit_code, len(errors)) == (2, 1), result.output
    assert "--accept-unattributed-objects" in errors[0]
    assert not (tmp_path / "o").exists()


def test_analysis_of_a_no_head_extract_warns(capsys: pytest.CaptureFixture[str]) -> None:
    """`reconcile analyze` warns on stderr of what the extract recorded: a no-HEAD extract,
    or one that does not say."""
    warn_risky_extract({"risky_options": ["--no-head-objects"], "warnings": []})
    warn_risky_extract({"risky_options": [], "warnings": [HEAD_UNRECORDED]})
    warn_risky_extract({"risky_options": [], "warnings": []})
    lines = capsys.readouterr().err.splitlines()
    assert (len(lines), lines[1]) == (2, f"WARNING: {HEAD_UNRECORDED}.")
    assert lines[0].startswith("WARNING: the extract was made with --no-head-objects")
