"""`python -m services.verifier` as a real process: configured by the environment, serves
verdicts, stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import time

from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.grpc_server import LIVENESS
from tests.helpers import READ_TIMEOUT, LoggedProcess
from tests.verifier.world import World, pdli
from tombstone.v1 import verifier_pb2 as pb
from tombstone.v1 import verifier_pb2_grpc as pb_grpc

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def test_the_process_serves_and_exits_zero_on_sigterm(
    world: World, zk: ZooKeeperServer, s3: S3Server
) -> None:
    """Started from TOMBSTONE_* variables, the process answers Verify, then exits 0 on
    SIGTERM."""
    await world.ledger(1)
    client = s3.client_config()
    env = {
        "TOMBSTONE_GRPC_PORT": "0",
        "TOMBSTONE_METRICS_PORT": "0",  # off: its default port is fixed
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_S3_ENDPOINT_URL": client["endpoint_url"],
        "TOMBSTONE_S3_ACCESS_KEY_ID": client["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": client["aws_secret_access_key"],
        "TOMBSTONE_S3_ALLOWED_BUCKETS": "offload",
        "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "1m",
    }
    verifier = await LoggedProcess.start("services.verifier", env)
    process = verifier.process
    try:
        ready = await verifier.wait_for("service_ready")
        await verifier.wait_for("shadow_scan_done")
        async with aio.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
            verdict = await pb_grpc.VerifierStub(channel).Verify(pb.VerifyRequest(pdli=pdli(1)))
        process.send_signal(signal.SIGTERM)
        await verifier.wait_for("service_stopped")
        code = await asyncio.wait_for(process.wait(), READ_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert (verdict.decision, code) == (pb.DELETE, 0)


async def _until_health(channel: aio.Channel, service: str, status: int) -> None:
    stub = health_pb2_grpc.HealthStub(channel)
    deadline = time.monotonic() + READ_TIMEOUT
    request = health_pb2.HealthCheckRequest(service=service)
    while (await stub.Check(request, timeout=5)).status != status:
        assert time.monotonic() < deadline, f"{service or '(server)'} never became {status}"
        await asyncio.sleep(0.1)


async def test_without_zookeeper_the_process_is_alive_but_not_ready(
    world: World, zk: ZooKeeperServer, s3: S3Server
) -> None:
    """ZooKeeper stopped: readiness turns NOT_SERVING (every verdict would be RETRY) while
    liveness stays SERVING, so a liveness probe would not restart it; ZooKeeper back:
    ready again."""
    await world.ledger(1)
    client = s3.client_config()
    env = {
        "TOMBSTONE_GRPC_PORT": "0",
        "TOMBSTONE_METRICS_PORT": "0",
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_S3_ENDPOINT_URL": client["endpoint_url"],
        "TOMBSTONE_S3_ACCESS_KEY_ID": client["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": client["aws_secret_access_key"],
        "TOMBSTONE_S3_ALLOWED_BUCKETS": "offload",
    }
    verifier = await LoggedProcess.start("services.verifier", env)
    process = verifier.process
    try:
        ready = await verifier.wait_for("service_ready")
        async with aio.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
            await _until_health(channel, "readiness", SERVING)
            await asyncio.to_thread(zk.stop)
            try:
                await _until_health(channel, "", NOT_SERVING)
                await _until_health(channel, "tombstone.v1.Verifier", NOT_SERVING)
                await _until_health(channel, LIVENESS, SERVING)
            finally:
                await asyncio.to_thread(zk.start)
            await _until_health(channel, "readiness", SERVING)
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), READ_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 0
