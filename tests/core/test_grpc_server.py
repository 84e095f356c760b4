"""The bootstrap serves, reports health, lists services by reflection and maps errors."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from devstack.fake_verifier import CRASH_LEDGER, SERVICE, verify_request
from services.core.config import GrpcServerConfig
from services.core.grpc_server import LIVENESS, READINESS, ServiceRunner
from tests.core.conftest import Running, grpc_config, start_service
from tombstone.v1 import verifier_pb2 as _pb

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def test_serves_a_call(service: Running) -> None:
    """A registered servicer answers on the bound port."""
    response = await service.stub.Verify(verify_request(5))
    assert (response.decision, response.reason) == (_pb.SKIP, "ledger 5")


async def test_health_is_serving_for_the_service_and_the_server(service: Running) -> None:
    """Once started, the named service, the whole server (""), readiness and liveness are all
    SERVING."""
    health = health_pb2_grpc.HealthStub(service.channel)
    statuses = [
        (await health.Check(health_pb2.HealthCheckRequest(service=name))).status
        for name in ("", SERVICE, READINESS, LIVENESS)
    ]
    assert statuses == [SERVING] * 4


async def test_health_turns_not_serving_on_shutdown() -> None:
    """A health watcher sees SERVING, then NOT_SERVING as soon as shutdown begins."""
    runner, _ = await start_service(grpc_config(grace=0.2))
    async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
        watch = health_pb2_grpc.HealthStub(channel).Watch(
            health_pb2.HealthCheckRequest(service=SERVICE)
        )
        first = await watch.read()
        stopping = asyncio.create_task(runner.shutdown())
        second = await watch.read()
        await stopping
    assert [first.status, second.status] == [SERVING, NOT_SERVING]


async def test_set_serving_reports_a_paused_service(service: Running) -> None:
    """A service that paused its work reports NOT_SERVING for itself, the server and
    readiness, then SERVING again once it resumes; liveness stays SERVING throughout (a
    restart would not bring the dependency back)."""
    health = health_pb2_grpc.HealthStub(service.channel)

    async def statuses() -> list[int]:
        return [
            (await health.Check(health_pb2.HealthCheckRequest(service=name))).status
            for name in ("", SERVICE, READINESS, LIVENESS)
        ]

    await service.runner.set_serving(False)
    paused = await statuses()
    await service.runner.set_serving(True)
    assert (paused, await statuses()) == ([NOT_SERVING] * 3 + [SERVING], [SERVING] * 4)


async def test_reflection_lists_the_service(service: Running) -> None:
    """Reflection names the registered service next to health and reflection."""
    stub = reflection_pb2_grpc.ServerReflectionStub(service.channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    responses = [response async for response in stub.ServerReflectionInfo(iter([request]))]
    names = {s.name for s in responses[0].list_services_response.service}
    assert {SERVICE, "grpc.health.v1.Health"} <= names


async def test_invalid_argument_names_the_field(service: Running) -> None:
    """A servicer's InvalidArgument reaches the client as INVALID_ARGUMENT naming the field."""
    with pytest.raises(aio.AioRpcError) as caught:
        await service.stub.Verify(verify_request(-3))
    expected = (grpc.StatusCode.INVALID_ARGUMENT, "pdli.ledger_id: must be non-negative, got -3")
    assert expected == (caught.value.code(), caught.value.details())


async def test_unexpected_error_is_internal_and_server_keeps_serving(service: Running) -> None:
    """A bug in a handler becomes INTERNAL for that call only; the next call succeeds."""
    with pytest.raises(aio.AioRpcError) as caught:
        await service.stub.Verify(verify_request(CRASH_LEDGER))
    after = await service.stub.Verify(verify_request(1))
    assert (caught.value.code(), after.reason) == (grpc.StatusCode.INTERNAL, "ledger 1")


async def test_shutdown_is_idempotent(service: Running) -> None:
    """Calling shutdown twice (and concurrently) stops once without error."""
    await asyncio.gather(service.runner.shutdown(), service.runner.shutdown())
    await service.runner.shutdown()
    assert service.runner.stopping.is_set()


async def test_readiness_needs_every_condition() -> None:
    """A condition recorded before the start holds readiness back from the first answer;
    readiness is SERVING only once every condition holds, and liveness throughout."""
    runner = ServiceRunner(
        name="probe", grpc=GrpcServerConfig(port=0), method_roles={}, handle_signals=False
    )
    async with runner:
        await runner.set_ready("zookeeper", False)
        port = await runner.start()
        async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)

            async def statuses() -> tuple[int, int]:
                ready = await health.Check(health_pb2.HealthCheckRequest(service=READINESS))
                live = await health.Check(health_pb2.HealthCheckRequest(service=LIVENESS))
                return ready.status, live.status

            seen = [await statuses()]
            await runner.set_serving(False)
            await runner.set_ready("zookeeper", True)
            seen.append(await statuses())
            await runner.set_serving(True)
            seen.append(await statuses())
        await runner.shutdown()
    assert seen == [(NOT_SERVING, SERVING), (NOT_SERVING, SERVING), (SERVING, SERVING)]
