"""`tombstone health`: SERVING is healthy; no answer or NOT_SERVING is not."""

from __future__ import annotations

import asyncio
import sys

from devstack.ports import free_port
from services.core.config import GrpcServerConfig
from services.core.grpc_server import ServiceRunner
from services.healthcheck import check_health
from tests.compose.stack_files import ROOT


async def _cli(address: str, *flags: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.cli", "health", "--address", address, "--timeout", "2",
        *flags,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def test_serving_service_is_healthy() -> None:
    """A running service answers SERVING and the command exits 0."""
    runner = ServiceRunner(
        name="probe", grpc=GrpcServerConfig(port=0), method_roles={}, handle_signals=False
    )
    async with runner:
        port = await runner.start()
        code, out = await _cli(f"127.0.0.1:{port}")
        await runner.shutdown()
    assert (0, f"127.0.0.1:{port}: SERVING") == (code, out.strip())


async def test_draining_service_is_not_serving() -> None:
    """After the stop sequence begins, health reports NOT_SERVING (or no answer): unhealthy."""
    runner = ServiceRunner(
        name="probe", grpc=GrpcServerConfig(port=0), method_roles={}, handle_signals=False
    )
    async with runner:
        port = await runner.start()
        await runner.shutdown()
        status = await check_health(f"127.0.0.1:{port}", timeout=2)
    assert status != "SERVING"


async def test_nothing_listening_is_unhealthy() -> None:
    """A refused connection exits 1 and says it was unreachable."""
    code, out = await _cli(f"127.0.0.1:{free_port('127.0.0.1')}")
    assert (code, "UNREACHABLE" in out) == (1, True)


async def test_a_paused_service_is_alive_but_not_ready() -> None:
    """While a service is paused on an outage, `--readiness` (and no flag) exit 1 and
    `--liveness` exits 0: a liveness probe does not restart it."""
    runner = ServiceRunner(
        name="probe", grpc=GrpcServerConfig(port=0), method_roles={}, handle_signals=False
    )
    async with runner:
        port = await runner.start()
        await runner.set_serving(False)
        address = f"127.0.0.1:{port}"
        answers = [(await _cli(address, *flags))[0] for flags in ((), ("--readiness",))]
        live, out = await _cli(address, "--liveness")
        await runner.shutdown()
    assert (answers, live, out.strip()) == ([1, 1], 0, f"{address}: SERVING")
