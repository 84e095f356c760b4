"""A real process on the bootstrap drains in-flight calls on SIGTERM and exits 0."""

from __future__ import annotations

import asyncio
import signal

from grpc import aio

from devstack.fake_verifier import SLOW_LEDGER, verify_request
from tests.helpers import READ_TIMEOUT, LoggedProcess
from tombstone.v1 import verifier_pb2_grpc


async def launch(env: dict[str, str]) -> LoggedProcess:
    """`python -m tests.core.slow_service`, a service built on the bootstrap."""
    return await LoggedProcess.start("tests.core.slow_service", env)


async def test_sigterm_drains_in_flight_call_and_exits_zero() -> None:
    """After SIGTERM, a call already running completes, then the process exits with code 0."""
    service = await launch(
        {
            "TOMBSTONE_GRPC_PORT": "0",
            "TOMBSTONE_GRPC_GRACE_PERIOD": "20s",
            "TOMBSTONE_LOG_FORMAT": "json",
        }
    )
    try:
        ready = await service.wait_for("service_ready")
        async with aio.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            call = asyncio.ensure_future(stub.Verify(verify_request(SLOW_LEDGER, marked_at_ms=500)))
            await service.wait_for("slow_verify_started")
            service.process.send_signal(signal.SIGTERM)
            response = await asyncio.wait_for(call, READ_TIMEOUT)
        await service.wait_for("service_stopped")
        code = await asyncio.wait_for(service.process.wait(), READ_TIMEOUT)
    finally:
        if service.process.returncode is None:
            service.process.kill()
            await service.process.wait()
    assert (0, f"ledger {SLOW_LEDGER}") == (code, response.reason)


async def test_readiness_line_reports_the_bound_port() -> None:
    """With port 0 the readiness line carries the real, non-zero port; SIGINT also stops it."""
    service = await launch({"TOMBSTONE_GRPC_PORT": "0", "TOMBSTONE_LOG_FORMAT": "json"})
    try:
        ready = await service.wait_for("service_ready")
        service.process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(service.process.wait(), READ_TIMEOUT)
    finally:
        if service.process.returncode is None:
            service.process.kill()
            await service.process.wait()
    assert (ready["port"] > 0, code) == (True, 0)
