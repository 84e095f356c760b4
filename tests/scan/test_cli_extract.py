"""`tombstone reconcile extract` in a child process (its own Spark): the run directory holds
every table, the summary line names the row counts, and nothing else reaches the terminal
but our own log lines on stderr (Spark's and the JVM's output goes to its log file)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec
from devstack.zookeeper import ZooKeeperServer
from services.scan.schema import TABLES
from tests.scan import sim

ROOT = Path(__file__).resolve().parents[2]


async def test_extract_command_writes_every_table(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """Exit 0, one Parquet dataset per table, and the counts of the written cluster."""
    spec = ClusterSpec(seed=41, tenants=1, namespaces_per_tenant=1)
    model = await sim.write(zk, s3, spec)
    config = s3.client_config()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOMBSTONE_", "AWS_"))}
    env |= {
        "TOMBSTONE_S3_ACCESS_KEY_ID": config["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": config["aws_secret_access_key"],
    }
    args = ["reconcile", "extract", "--zookeeper", zk.address, "--cluster", sim.CLUSTER]
    args += ["--s3-endpoint", config["endpoint_url"], "--bucket", spec.bucket]
    args += ["--out", str(tmp_path / "run"), "--master", "local[1]"]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.cli",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 150)
    text, errors = out.decode(), err.decode()
    tables = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert (process.returncode, tables) == (0, sorted(TABLES)), (text + errors)[-2000:]
    # stdout: the result line only; stderr: our structured log lines (JSON off a terminal).
    assert len(text.splitlines()) == 1, text
    assert f"bk_ledgers {len(list(model.bookkeeper_ledgers()))}," in text
    foreign = [line for line in errors.splitlines() if not line.startswith("{")]
    assert foreign == [], errors[-2000:]
    events = {json.loads(line)["event"] for line in errors.splitlines()}
    assert {"spark output", "extract done"} <= events
