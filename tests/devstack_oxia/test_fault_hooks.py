"""The devstack server's fault hooks for the adapter's failure tests: sessions expired on
demand, a stop from another thread, and a halt with a restart on the same port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from devstack.oxia import OxiaServer, schema
from services.metadata.oxia._client import open_client

from .conftest import RawStub, oxia
from .test_semantics import missing, wait_for


def test_expire_sessions_deletes_ephemerals_and_forgets_the_sessions(
    server: OxiaServer, client, raw: RawStub, prefix: str
):
    key = prefix + "/eph"
    client.put(key, "x", ephemeral=True)
    client.put(prefix + "/kept", "y")
    shard = client._service_discovery.get_shard(key).shard
    session = client._session_manager.sessions_by_shard[shard]
    server.expire_sessions()
    wait_for(lambda: missing(client, key), "the ephemeral record deleted")
    assert client.get(prefix + "/kept")[1] == b"y"
    with pytest.raises(grpc.RpcError) as refused:
        raw.call("KeepAlive", shard=shard, session_id=session.session_id())
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(oxia.ex.SessionNotFound):
        client.put(key, "again", ephemeral=True)


def test_stop_from_thread_ends_service(server: OxiaServer):
    server.stop_from_thread()
    channel = grpc.insecure_channel(server.address)
    try:
        call = channel.unary_unary(
            f"/{schema.SERVICE}/CreateSession",
            request_serializer=schema.message("CreateSessionRequest").SerializeToString,
            response_deserializer=schema.message("CreateSessionResponse").FromString,
        )
        with pytest.raises(grpc.RpcError) as failed:
            call(schema.message("CreateSessionRequest")(shard=0, session_timeout_ms=5000))
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        channel.close()


@pytest.fixture
def restartable_client(server: OxiaServer) -> Iterator[Any]:
    """A client that survives a server restart: the 0.2.1 client's assignments thread waits
    on its start barrier again after every answer, so after a restart it blocks and `close`
    hangs. The adapter's `open_client` builds the same client with a barrier passed once."""
    made = open_client(server.address, "default", 5_000, 10.0, lambda _session: None)
    try:
        yield made
    finally:
        made.close()


def test_a_halted_server_restarts_on_its_port_with_its_records(
    server: OxiaServer, restartable_client: Any, prefix: str
):
    """Halted, nothing answers; restarted, the same address serves the records written
    before, and a client that knew it writes again."""
    client = restartable_client
    client.put(prefix + "/kept", "y")
    address = server.address
    server.halt_from_thread()
    assert _create_session_fails(address) == grpc.StatusCode.UNAVAILABLE
    server.restart_from_thread()
    assert server.address == address
    wait_for(lambda: _readable(client, prefix + "/kept"), "the record served again")
    client.put(prefix + "/after", "z")
    assert client.get(prefix + "/after")[1] == b"z"


def _readable(client, key: str) -> bool:
    try:
        return bool(client.get(key)[1] == b"y")
    except Exception:  # the client's own errors while it reconnects
        return False


def _create_session_fails(address: str) -> grpc.StatusCode | None:
    channel = grpc.insecure_channel(address)
    try:
        call = channel.unary_unary(
            f"/{schema.SERVICE}/CreateSession",
            request_serializer=schema.message("CreateSessionRequest").SerializeToString,
            response_deserializer=schema.message("CreateSessionResponse").FromString,
        )
        try:
            call(schema.message("CreateSessionRequest")(shard=0, session_timeout_ms=5000))
        except grpc.RpcError as failed:
            return failed.code()
        return None
    finally:
        channel.close()
