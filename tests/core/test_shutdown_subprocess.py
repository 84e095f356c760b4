"""A real process on the bootstrap drains in-flight calls on SIGTERM and exits 0."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from grpc import aio

from tests.core.fake_verifier import SLOW_LEDGER, verify_request
from tombstone.v1 import verifier_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
READ_TIMEOUT = 30.0


class ServiceProcess:
    """`python -m tests.core.slow_service` with its JSON log lines parsed as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.events: list[dict[str, Any]] = []

    async def wait_for(self, event: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), READ_TIMEOUT)
            assert line, f"service exited before logging {event}: {self.events}"
            record: dict[str, Any] = json.loads(line)
            self.events.append(record)
            if record.get("event") == event:
                return record


async def launch(env: dict[str, str]) -> ServiceProcess:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.core.slow_service",
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
    )
    return ServiceProcess(process)


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
