"""Failed calls become typed errors; an unknown outcome is never a negative answer."""

from __future__ import annotations

from datetime import timedelta

import pytest

from devstack.fake_verifier import CRASH_LEDGER, SLOW_LEDGER, verify_request
from devstack.ports import free_port
from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig
from services.core.errors import InvalidArgument, TombstoneError, Unavailable
from tests.core.conftest import Running
from tombstone.v1 import verifier_pb2_grpc


async def verify_via_client(config: ClientConfig, ledger_id: int, **kw) -> TombstoneError:
    async with open_channel(config) as channel:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        with pytest.raises(TombstoneError) as caught, rpc_errors("verifier"):
            await stub.Verify(verify_request(ledger_id, **kw))
    return caught.value


async def test_invalid_argument_keeps_the_field(service: Running) -> None:
    """INVALID_ARGUMENT comes back as InvalidArgument with the server's field name."""
    error = await verify_via_client(ClientConfig(address=service.address), -1)
    assert isinstance(error, InvalidArgument)
    assert error.field == "pdli.ledger_id"


async def test_internal_is_unavailable(service: Running) -> None:
    """A server-side bug (INTERNAL) leaves the outcome unknown: Unavailable."""
    error = await verify_via_client(ClientConfig(address=service.address), CRASH_LEDGER)
    assert Unavailable is type(error)


async def test_deadline_is_unavailable(service: Running) -> None:
    """A call over the configured default deadline becomes Unavailable."""
    config = ClientConfig(address=service.address, timeout=timedelta(milliseconds=100))
    error = await verify_via_client(config, SLOW_LEDGER, marked_at_ms=1_000)
    assert Unavailable is type(error)


async def test_nobody_listening_is_unavailable() -> None:
    """A refused connection is Unavailable, not an answer."""
    config = ClientConfig(address=f"127.0.0.1:{free_port()}", timeout=timedelta(seconds=2))
    error = await verify_via_client(config, 1)
    assert Unavailable is type(error)
