"""The stop sequence: drain calls, then cancel background loops, then close resources."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
import structlog
from grpc import aio

from devstack.fake_verifier import METHOD_ROLES, SLOW_LEDGER, add_fake_verifier, verify_request
from services.core.config import GrpcServerConfig
from services.core.grpc_server import BackgroundTaskFailed, ServiceRunner
from tests.core.conftest import grpc_config
from tombstone.v1 import verifier_pb2_grpc


def make_runner() -> ServiceRunner:
    return ServiceRunner(
        name="fake", grpc=grpc_config(grace=5), method_roles=METHOD_ROLES, handle_signals=False
    )


async def test_stop_drains_calls_then_cancels_loops_then_closes_resources() -> None:
    """An in-flight call completes before background loops are cancelled; resources close
    last, in reverse order of opening."""
    order: list[str] = []
    runner = make_runner()
    servicer = add_fake_verifier(runner)

    async def loop() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            order.append(f"loop cancelled after calls {servicer.completed}")
            raise

    async with runner:
        runner.resources.callback(order.append, "first resource closed")
        runner.resources.callback(order.append, "second resource closed")
        runner.add_background("loop", loop)
        await runner.start()
        running = asyncio.create_task(runner.run())
        async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            call = asyncio.ensure_future(stub.Verify(verify_request(SLOW_LEDGER, marked_at_ms=300)))
            await asyncio.wait_for(servicer.slow_started.wait(), 10)
            runner.request_stop()
            await call
        await running
    expected = [
        f"loop cancelled after calls [{SLOW_LEDGER}]",
        "second resource closed",
        "first resource closed",
    ]
    assert expected == order


async def test_background_crash_stops_the_service_and_is_raised() -> None:
    """A failing background loop is logged, stops the service and surfaces from run()."""
    runner = make_runner()
    add_fake_verifier(runner)

    async def broken() -> None:
        raise RuntimeError("consumer lost")

    runner.add_background("consumer", broken)
    with structlog.testing.capture_logs() as logs, pytest.raises(BackgroundTaskFailed) as caught:
        async with runner:
            await runner.run()
    failed = [line["task"] for line in logs if line["event"] == "background_task_failed"]
    assert (
        failed,
        str(caught.value.cause),
        runner.stopping.is_set(),
    ) == (["consumer"], "consumer lost", True)


async def test_shutdown_before_start_closes_resources() -> None:
    """Leaving the runner before it served still closes what was opened."""
    closed: list[str] = []
    async with make_runner() as runner:
        runner.resources.callback(closed.append, "zk")
    assert closed == ["zk"]


async def test_cancelling_run_still_shuts_down() -> None:
    """Cancelling run() (e.g. by asyncio.run on Ctrl-C) still closes resources."""
    closed: list[str] = []
    runner = make_runner()
    add_fake_verifier(runner)
    async with runner:
        runner.resources.callback(closed.append, "s3")
        task = asyncio.create_task(runner.run())
        await asyncio.sleep(0.05)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert closed == ["s3"]


async def test_port_in_use_fails_to_start_with_the_address() -> None:
    """A second service on a taken port fails with OSError naming the address."""
    first = make_runner()
    add_fake_verifier(first)
    async with first:
        port = await first.start()
        second = ServiceRunner(
            name="second",
            grpc=GrpcServerConfig(port=port),
            method_roles=METHOD_ROLES,
            handle_signals=False,
        )
        add_fake_verifier(second)
        async with second:
            with pytest.raises(OSError, match=f"127.0.0.1:{port}"):
                await second.start()
