"""Fixtures for the core: an in-process service on a free port, and clean structlog state."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import cast

import pytest
import structlog
from grpc import aio

from devstack.fake_verifier import METHOD_ROLES, FakeVerifier, add_fake_verifier
from services.core.config import AuthConfig, GrpcServerConfig, Principal
from services.core.grpc_server import ServiceRunner
from tombstone.v1 import verifier_pb2_grpc

TOKENS = {
    "deleter-token": Principal("deleter-1", frozenset({"deleter"})),
    "broker-token": Principal("broker-1", frozenset({"broker"})),
}


@pytest.fixture(autouse=True)
def _reset_structlog() -> Iterator[None]:
    """Each test starts and ends with structlog's defaults and no bound context."""
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


@dataclass
class Running:
    runner: ServiceRunner
    servicer: FakeVerifier
    channel: aio.Channel
    stub: verifier_pb2_grpc.VerifierAsyncStub

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.runner.port}"


def grpc_config(*, auth: bool = False, grace: float = 2.0) -> GrpcServerConfig:
    return GrpcServerConfig(
        port=0,
        grace_period=timedelta(seconds=grace),
        auth=AuthConfig(enabled=auth, tokens=TOKENS if auth else {}),
    )


async def start_service(config: GrpcServerConfig) -> tuple[ServiceRunner, FakeVerifier]:
    runner = ServiceRunner(
        name="fake", grpc=config, method_roles=METHOD_ROLES, handle_signals=False
    )
    servicer = add_fake_verifier(runner)
    await runner.start()
    return runner, servicer


async def _running(config: GrpcServerConfig) -> AsyncIterator[Running]:
    runner, servicer = await start_service(config)
    channel = aio.insecure_channel(f"127.0.0.1:{runner.port}")
    try:
        stub = cast("verifier_pb2_grpc.VerifierAsyncStub", verifier_pb2_grpc.VerifierStub(channel))
        yield Running(runner, servicer, channel, stub)
    finally:
        await channel.close()
        await runner.shutdown()


@pytest.fixture
async def service() -> AsyncIterator[Running]:
    """The fake verifier on the core bootstrap, auth off."""
    async for running in _running(grpc_config()):
        yield running


@pytest.fixture
async def secured() -> AsyncIterator[Running]:
    """The fake verifier with token auth on (see TOKENS)."""
    async for running in _running(grpc_config(auth=True)):
        yield running
