"""The devstack server's fault hooks for the adapter's failure tests: sessions expired on
demand and a stop from another thread."""

from __future__ import annotations

import grpc
import pytest

from devstack.oxia import OxiaServer, schema

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
