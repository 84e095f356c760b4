"""`tombstone reconcile extract` in a child process (its own Spark): the run directory holds
every table, and the summary line names the row counts."""

from __future__ import annotations

import asyncio
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
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 150)
    text = out.decode()
    tables = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert (process.returncode, tables) == (0, sorted(TABLES)), text[-2000:]
    assert f"bk_ledgers {len(list(model.bookkeeper_ledgers()))}," in text
