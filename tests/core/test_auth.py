"""Token authentication with roles: who may call what."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.fake_verifier import verify_request
from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig
from services.core.errors import PermissionDenied, Unauthenticated
from tests.core.conftest import Running
from tombstone.v1 import verifier_pb2 as _pb
from tombstone.v1 import verifier_pb2_grpc


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


async def call_code(secured: Running, metadata: Any) -> grpc.StatusCode:
    try:
        await secured.stub.Verify(verify_request(1), metadata=metadata)
    except aio.AioRpcError as error:
        return error.code()
    return grpc.StatusCode.OK


async def test_no_token_is_unauthenticated(secured: Running) -> None:
    """A call without authorization metadata is refused as UNAUTHENTICATED."""
    assert await call_code(secured, None) == grpc.StatusCode.UNAUTHENTICATED


async def test_unknown_token_is_unauthenticated(secured: Running) -> None:
    """A token not in the table is refused as UNAUTHENTICATED."""
    assert await call_code(secured, bearer("forged")) == grpc.StatusCode.UNAUTHENTICATED


async def test_non_bearer_scheme_is_unauthenticated(secured: Running) -> None:
    """Only the Bearer scheme is accepted."""
    metadata = (("authorization", "Basic deleter-token"),)
    assert await call_code(secured, metadata) == grpc.StatusCode.UNAUTHENTICATED


async def test_wrong_role_is_permission_denied(secured: Running) -> None:
    """A known token whose roles the method does not allow gets PERMISSION_DENIED."""
    assert await call_code(secured, bearer("broker-token")) == grpc.StatusCode.PERMISSION_DENIED


async def test_right_role_is_allowed(secured: Running) -> None:
    """A token holding a role the method allows gets its answer."""
    assert await call_code(secured, bearer("deleter-token")) == grpc.StatusCode.OK


async def test_health_is_open_without_token(secured: Running) -> None:
    """Health checks need no token even with auth on."""
    health = health_pb2_grpc.HealthStub(secured.channel)
    response = await health.Check(health_pb2.HealthCheckRequest(service=""))
    assert response.status == health_pb2.HealthCheckResponse.SERVING


async def test_auth_disabled_allows_everything(service: Running) -> None:
    """With auth off, a call without any token is served."""
    response = await service.stub.Believe(_pb.BelieveRequest())
    assert response.accepted == 0


async def test_client_sends_its_token(secured: Running) -> None:
    """`open_channel` adds the configured token, so the call is authorized."""
    config = ClientConfig(address=secured.address, token="broker-token")
    async with open_channel(config) as channel:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        with rpc_errors("verifier"):
            response = await stub.Believe(_pb.BelieveRequest(pdlis=[verify_request(1).pdli]))
    assert response.accepted == 1


@pytest.mark.parametrize(
    ("token", "expected"),
    [(None, Unauthenticated), ("broker-token", PermissionDenied)],
)
async def test_client_gets_typed_auth_errors(secured: Running, token, expected) -> None:
    """Refusals reach the calling service as the matching typed error."""
    config = ClientConfig(address=secured.address, token=token, timeout=timedelta(seconds=5))
    async with open_channel(config) as channel:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        with pytest.raises(expected), rpc_errors("verifier"):
            await stub.Verify(verify_request(1))
