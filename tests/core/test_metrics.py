"""Metrics live on a per-service registry and are served as Prometheus text."""

from __future__ import annotations

from datetime import timedelta

import aiohttp
from grpc import aio

from devstack.fake_verifier import METHOD_ROLES, add_fake_verifier, verify_request
from devstack.ports import free_port
from services.core.config import GrpcServerConfig, MetricsConfig
from services.core.grpc_server import ServiceRunner
from services.core.metrics import Metrics, MetricsServer, version
from tombstone.v1 import verifier_pb2_grpc


async def scrape(port: int) -> tuple[str, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return response.headers["Content-Type"], await response.text()


def test_registries_are_separate() -> None:
    """Two services in one process may define the same metric without clashing."""
    first, second = Metrics(), Metrics()
    first.counter("pdli_received", "PDLIs received").inc()
    second.counter("pdli_received", "PDLIs received")
    assert (
        first.registry.get_sample_value("tombstone_pdli_received_total"),
        second.registry.get_sample_value("tombstone_pdli_received_total"),
    ) == (1.0, 0.0)


async def test_endpoint_serves_prometheus_text() -> None:
    """`GET /metrics` returns the text format with the `tombstone_` metrics."""
    metrics = Metrics()
    metrics.gauge("inflight_deletions", "Deletions in flight").set(3)
    server = MetricsServer(metrics, host="127.0.0.1", port=0)
    port = await server.start()
    try:
        content_type, body = await scrape(port)
    finally:
        await server.stop()
    assert (
        content_type.startswith("text/plain"),
        "tombstone_inflight_deletions 3.0" in body,
    ) == (True, True)


async def test_runner_counts_rpcs_on_its_endpoint() -> None:
    """A service's endpoint reports its served calls by method and status code."""
    runner = ServiceRunner(
        name="fake",
        grpc=GrpcServerConfig(grace_period=timedelta(0)),
        metrics=MetricsConfig(port=free_port()),
        method_roles=METHOD_ROLES,
        handle_signals=False,
    )
    add_fake_verifier(runner)
    async with runner:
        await runner.start()
        async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
            await verifier_pb2_grpc.VerifierStub(channel).Verify(verify_request(2))
        _, body = await scrape(runner.metrics_port or 0)
    line = 'tombstone_rpc_calls_total{code="OK",method="/tombstone.v1.Verifier/Verify"} 1.0'
    assert line in body


def test_every_service_runner_exports_its_build_info() -> None:
    """`tombstone_build_info` names the service and the installed version, with value 1."""
    runner = ServiceRunner(
        name="fake",
        grpc=GrpcServerConfig(grace_period=timedelta(0)),
        method_roles=METHOD_ROLES,
        handle_signals=False,
    )
    [sample] = [
        s
        for m in runner.metrics.registry.collect()
        if m.name == "tombstone_build_info"
        for s in m.samples
    ]
    expected = ("fake", version(), 1.0)
    assert expected == (sample.labels["service"], sample.labels["version"], sample.value)
