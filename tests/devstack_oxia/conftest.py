"""The real `oxia` client (from its source release, see `client_sdist`) and devstack Oxia
servers for it, plus a raw gRPC stub for what the client does not expose."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from devstack.oxia import OxiaServer, running_in_thread, schema

from . import client_sdist

_SRC = str(client_sdist.unpacked() / "src")
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)

import oxia  # noqa: E402  (importable only from here on)

from . import client_fixes  # noqa: E402

client_fixes.install()

__all__ = ["RawStub", "oxia"]


@pytest.fixture
def server() -> Iterator[OxiaServer]:
    with running_in_thread(shards=3) as running:
        yield running


@pytest.fixture
def client(server: OxiaServer) -> Iterator[Any]:
    made = oxia.Client(server.address, session_timeout_ms=5_000)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def prefix() -> str:
    return f"/t-{uuid.uuid4().hex[:8]}"


class RawStub:
    """Calls `OxiaClient` methods by name with this repository's own message classes."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)

    def call(self, method: str, **fields: Any) -> Any:
        request, response, client_streams, server_streams = schema.METHODS[method]
        assert not client_streams
        make = self.channel.unary_stream if server_streams else self.channel.unary_unary
        return make(
            f"/{schema.SERVICE}/{method}",
            request_serializer=schema.message(request).SerializeToString,
            response_deserializer=schema.message(response).FromString,
        )(schema.message(request)(**fields))


@pytest.fixture
def raw(server: OxiaServer) -> Iterator[RawStub]:
    stub = RawStub(server.address)
    try:
        yield stub
    finally:
        stub.channel.close()
