"""Requests that are not valid protobuf: INVALID_ARGUMENT naming `request`, after auth.

Found by the gRPC fuzz campaign (docs/fuzz.md): left to grpc, a truncated varint or a string
field with bad UTF-8 failed before any interceptor ran, so the caller got UNKNOWN (whatever
its token, even none) and the service logged a traceback.
"""

from __future__ import annotations

import grpc
import pytest
from grpc import aio

from devstack.fake_verifier import verify_request
from services.core._interceptors import MAX_DETAILS
from tests.core.conftest import Running

VERIFY = "/tombstone.v1.Verifier/Verify"
NOT_PROTOBUF = [
    b"\x08",  # a varint field with no value
    b"\x0f",  # wire type 7
    b"\x0a\x05abc",  # a length past the end
    b"\x0a\x04\x22\x02\xc3\x28",  # pdli.topic_name with invalid UTF-8
]


async def raw_call(running: Running, data: bytes, token: str | None) -> aio.AioRpcError | None:
    method = running.channel.unary_unary(
        VERIFY, request_serializer=None, response_deserializer=None
    )
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    try:
        await method(data, metadata=metadata, timeout=10)
    except aio.AioRpcError as error:
        return error
    return None


@pytest.mark.parametrize("data", NOT_PROTOBUF)
async def test_bad_bytes_are_invalid_argument(secured: Running, data: bytes) -> None:
    """An authorized caller sending bytes that do not parse gets INVALID_ARGUMENT `request: ...`."""
    error = await raw_call(secured, data, "deleter-token")
    assert error is not None
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (error.details() or "").startswith("request: not a valid protobuf message")


@pytest.mark.parametrize("data", NOT_PROTOBUF)
async def test_bad_bytes_without_token_are_unauthenticated(secured: Running, data: bytes) -> None:
    """Auth runs before the bytes are parsed: no token is UNAUTHENTICATED, not a parse error."""
    error = await raw_call(secured, data, None)
    assert error is not None
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_bad_bytes_with_auth_off(service: Running) -> None:
    """With auth off the same bytes are still INVALID_ARGUMENT, and the service keeps serving."""
    error = await raw_call(service, b"\x08", None)
    assert error is not None
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert await raw_call(service, verify_request(1).SerializeToString(), None) is None


async def test_a_message_echoing_a_huge_value_is_cut(secured: Running) -> None:
    """INVALID_ARGUMENT whose message echoes a 70 KB name still arrives as INVALID_ARGUMENT
    naming the field (found by the fuzz campaign: it was RESOURCE_EXHAUSTED, the trailer
    exceeding grpc's metadata limit), the message cut to a bounded length."""
    request = verify_request(1)
    request.pdli.topic_name = "bad" + "x" * 70_000
    error = await raw_call(secured, request.SerializeToString(), "deleter-token")
    assert error is not None
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = error.details() or ""
    assert details.startswith("pdli.topic_name: 'badxxx")
    assert details.endswith("(70022 characters)")
    assert len(details) <= MAX_DETAILS
