"""`python -m services.verifier` as a real process: configured by the environment, serves
verdicts, stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from grpc import aio

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from tests.verifier.world import World, pdli
from tombstone.v1 import verifier_pb2 as pb
from tombstone.v1 import verifier_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[2]
READ_TIMEOUT = 30.0


async def read_until(process: asyncio.subprocess.Process, event: str) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = await asyncio.wait_for(process.stdout.readline(), READ_TIMEOUT)
        assert line, f"the verifier exited before logging {event}"
        record: dict[str, Any] = json.loads(line)
        if record.get("event") == event:
            return record


async def test_the_process_serves_and_exits_zero_on_sigterm(
    world: World, zk: ZooKeeperServer, s3: S3Server
) -> None:
    """Started from TOMBSTONE_* variables, the process answers Verify, then exits 0 on
    SIGTERM."""
    await world.ledger(1)
    client = s3.client_config()
    env = {
        "TOMBSTONE_GRPC_PORT": "0",
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_S3_ENDPOINT_URL": client["endpoint_url"],
        "TOMBSTONE_S3_ACCESS_KEY_ID": client["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": client["aws_secret_access_key"],
        "TOMBSTONE_S3_ALLOWED_BUCKETS": "offload",
        "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "1m",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.verifier",
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        ready = await read_until(process, "service_ready")
        await read_until(process, "shadow_scan_done")
        async with aio.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
            verdict = await pb_grpc.VerifierStub(channel).Verify(pb.VerifyRequest(pdli=pdli(1)))
        process.send_signal(signal.SIGTERM)
        await read_until(process, "service_stopped")
        code = await asyncio.wait_for(process.wait(), READ_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert (verdict.decision, code) == (pb.DELETE, 0)
