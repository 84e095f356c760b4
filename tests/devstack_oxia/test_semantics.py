"""What Tombstone will rely on from Oxia, through the real `oxia` client against the devstack
server: versions, conditional writes, key order, ephemerals and resumable notifications.

Key order is Oxia's hierarchical one (`common/compare/encode.go` in the Oxia server): keys
sort by their count of `/`, then byte-wise with `/` above every other byte.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import grpc
import pytest

from devstack.oxia import OxiaServer, running_in_thread, schema

from .conftest import RawStub, oxia


def hierarchical(key: str) -> tuple[int, bytes]:
    """The order Oxia documents, written out plainly (no internal or `//` keys here)."""
    return key.count("/"), key.encode().replace(b"/", b"\xff")


def wait_for(predicate: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.05)


def missing(client: Any, key: str) -> bool:
    try:
        client.get(key)
    except oxia.ex.KeyNotFound:
        return True
    return False


# -- versions and conditional writes -----------------------------------------


def test_versions_count_modifications_and_restart_when_a_key_is_recreated(client, prefix):
    key = prefix + "/k"
    _, first = client.put(key, "1")
    _, second = client.put(key, "2")
    assert second.version_id() > first.version_id()
    assert (first.modifications_count(), second.modifications_count()) == (0, 1)
    assert second.created_timestamp() == first.created_timestamp()
    assert client.delete(key)
    _, again = client.put(key, "3")
    assert again.modifications_count() == 0
    assert again.version_id() > second.version_id()


def test_put_with_an_expected_version_succeeds_only_on_that_version(client, prefix):
    key = prefix + "/k"
    _, created = client.put(key, "a", expected_version_id=oxia.EXPECTED_RECORD_DOES_NOT_EXIST)
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put(key, "b", expected_version_id=oxia.EXPECTED_RECORD_DOES_NOT_EXIST)
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put(key, "b", expected_version_id=created.version_id() + 1)
    _, updated = client.put(key, "b", expected_version_id=created.version_id())
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put(key, "c", expected_version_id=created.version_id())
    assert client.get(key)[1] == b"b"
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.put(prefix + "/absent", "x", expected_version_id=updated.version_id())


def test_delete_with_an_expected_version(client, prefix):
    key = prefix + "/k"
    _, version = client.put(key, "a")
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.delete(key, expected_version_id=version.version_id() + 1)
    assert client.get(key)[1] == b"a"
    assert client.delete(key, expected_version_id=version.version_id())
    assert missing(client, key)
    # Gone: an expected version cannot match (Oxia checks it before looking for the key),
    # while "must not exist" finds nothing to delete.
    with pytest.raises(oxia.ex.UnexpectedVersionId):
        client.delete(key, expected_version_id=version.version_id())
    assert not client.delete(key, expected_version_id=oxia.EXPECTED_RECORD_DOES_NOT_EXIST)
    assert not client.delete(key)


def test_each_put_takes_the_next_version_id_and_deletes_take_none(raw: RawStub):
    """Version ids count puts (sessions' records included), not log entries."""
    puts = [{"key": "/v/a", "value": b"1"}, {"key": "/v/b", "value": b"2"}]
    both = raw.call("Write", shard=0, puts=puts)
    assert [p.version.version_id for p in both.puts] == [0, 1]
    raw.call("Write", shard=0, deletes=[{"key": "/v/a"}])
    raw.call("CreateSession", shard=0, session_timeout_ms=5_000, client_identity="c")
    after = raw.call("Write", shard=0, puts=[{"key": "/v/c", "value": b"3"}])
    assert after.puts[0].version.version_id == 3


# -- order ---------------------------------------------------------------------

TREE = ["/a", "/b", "/a/x", "/a/y", "/ab", "/a/x/1", "/b/a", "/a-b", "/a/x/2"]


def test_list_and_range_scan_follow_the_hierarchical_order(client, prefix):
    keys = [prefix + suffix for suffix in TREE]
    for key in keys:
        client.put(key, key)
    everything = prefix + "/\U0010ffff/\U0010ffff/\U0010ffff"
    expected = sorted(keys, key=hierarchical)
    listed = client.list(prefix + "/", everything)
    assert sorted(listed, key=hierarchical) == expected
    # A range holds only the depths between its bounds: the children of /a, not deeper.
    assert client.list(prefix + "/a/", prefix + "/a/~") == [prefix + "/a/x", prefix + "/a/y"]


def test_range_scan_on_one_shard_is_in_order(client, prefix):
    keys = [prefix + suffix for suffix in TREE]
    for key in keys:
        client.put(key, key, partition_key="p")
    end = prefix + "/\U0010ffff/\U0010ffff/\U0010ffff"
    scanned = [k for k, _, _ in client.range_scan(prefix + "/", end, partition_key="p")]
    assert scanned == sorted(keys, key=hierarchical)
    assert client.list(prefix + "/", end, partition_key="p") == scanned


def test_delete_range_removes_one_level_only(client, prefix):
    keys = [prefix + suffix for suffix in TREE]
    for key in keys:
        client.put(key, key, partition_key="p")
    client.delete_range(prefix + "/a/", prefix + "/a/~", partition_key="p")
    left = client.list(prefix + "/", prefix + "/~/~/~", partition_key="p")
    assert prefix + "/a/x" not in left
    assert prefix + "/a/y" not in left
    assert prefix + "/a/x/1" in left
    assert prefix + "/a" in left


# -- ephemerals ----------------------------------------------------------------


def test_ephemerals_vanish_when_their_session_closes(server, client, prefix):
    owner = oxia.Client(server.address, session_timeout_ms=5_000, client_identifier="owner")
    try:
        _, version = owner.put(prefix + "/e", "x", ephemeral=True)
        owner.put(prefix + "/kept", "y")
        assert version.is_ephemeral()
        assert client.get(prefix + "/e")[2].client_identity() == "owner"
    finally:
        owner.close()
    wait_for(lambda: missing(client, prefix + "/e"), "the ephemeral record is removed")
    assert client.get(prefix + "/kept")[1] == b"y"


def test_ephemerals_vanish_when_their_session_expires(raw: RawStub, client, prefix):
    """A session that stops sending heartbeats expires after its timeout (2 s, Oxia's least)
    and its records go; a keepalive after that finds no session."""
    key = prefix + "/e"
    shard = client._service_discovery.get_shard(key).shard
    session = raw.call("CreateSession", shard=shard, session_timeout_ms=2_000, client_identity="c")
    put = {"key": key, "value": b"x", "session_id": session.session_id, "client_identity": "c"}
    written = raw.call("Write", shard=shard, puts=[put])
    assert written.puts[0].status == 0
    assert client.get(key)[2].session_id() == session.session_id
    wait_for(lambda: missing(client, key), "the expired session's record is removed")
    with pytest.raises(grpc.RpcError) as caught:
        raw.call("KeepAlive", shard=shard, session_id=session.session_id)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    rejected = raw.call("Write", shard=shard, puts=[put])
    assert rejected.puts[0].status == 3  # SESSION_DOES_NOT_EXIST


# -- notifications ---------------------------------------------------------------


def test_notifications_resume_after_a_reconnect_without_gaps(raw: RawStub, client, prefix):
    key = prefix + "/n"
    shard = client._service_discovery.get_shard(key).shard
    stream = raw.call("GetNotifications", shard=shard)
    start = next(stream)
    assert not start.notifications  # the first batch only says where the stream starts
    client.put(key, "1")
    first = next(stream)
    assert dict(first.notifications)[key].type == 0  # KEY_CREATED
    stream.cancel()

    _, version = client.put(key, "2")
    client.delete(key)
    resumed = raw.call("GetNotifications", shard=shard, start_offset_exclusive=first.offset)
    modified, deleted = next(resumed), next(resumed)
    resumed.cancel()
    assert first.offset < modified.offset < deleted.offset
    assert modified.notifications[key].type == 1  # KEY_MODIFIED
    assert modified.notifications[key].version_id == version.version_id()
    assert deleted.notifications[key].type == 2  # KEY_DELETED
    assert not deleted.notifications[key].HasField("version_id")


def test_the_client_resumes_its_notifications_after_the_server_drops_the_stream(prefix):
    """The client's own reconnect: what was written while it was cut off still arrives, once
    and in order.

    One shard: after a reconnect the client (0.2.1) holds each shard's stream after its
    first batch until every shard has sent one, and a stream resumed from an offset sends
    nothing until that shard is written to (Oxia's server does the same), so with idle
    shards the resumed notifications stall after the first."""
    with running_in_thread(shards=1) as one:
        client = oxia.Client(one.address)
        notifications = client.get_notifications()
        try:
            client.put(prefix + "/1", "x")
            assert next(notifications).key() == prefix + "/1"
            one.drop_notification_streams()
            client.put(prefix + "/2", "x")
            client.put(prefix + "/3", "x")
            client.delete(prefix + "/1")
            got = [(n.key(), n.notification_type()) for n in itertools.islice(notifications, 3)]
        finally:
            notifications.close()
            client.close()
    created, deleted = oxia.NotificationType.KEY_CREATED, oxia.NotificationType.KEY_DELETED
    assert got == [(prefix + "/2", created), (prefix + "/3", created), (prefix + "/1", deleted)]


def test_a_delete_range_is_one_range_notification(client, prefix):
    notifications = client.get_notifications()
    try:
        client.put(prefix + "/a", "1", partition_key="p")
        assert next(notifications).key() == prefix + "/a"
        client.delete_range(prefix + "/", prefix + "/~", partition_key="p")
        ranged = next(notifications)
        assert ranged.notification_type() is oxia.NotificationType.KEY_RANGE_DELETED
        assert (ranged.key(), ranged.key_range_end()) == (prefix + "/", prefix + "/~")
    finally:
        notifications.close()


# -- bad input --------------------------------------------------------------------


def test_bad_requests_are_refused_not_guessed(server: OxiaServer, raw: RawStub):
    def call(method: str, **fields: Any) -> None:
        answer = raw.call(method, **fields)
        if schema.METHODS[method][3]:  # a server stream fails on its first read
            next(answer)

    def code(method: str, **fields: Any) -> grpc.StatusCode:
        with pytest.raises(grpc.RpcError) as caught:
            call(method, **fields)
        return caught.value.code()

    assert code("Write", shard=7, puts=[{"key": "k"}]) == grpc.StatusCode.NOT_FOUND
    assert code("Write", puts=[{"key": "k"}]) == grpc.StatusCode.INVALID_ARGUMENT
    assert code("Write", shard=0, puts=[{"key": "__oxia/x"}]) == grpc.StatusCode.INVALID_ARGUMENT
    no_partition = {"key": "a", "sequence_key_delta": [1]}
    assert code("Write", shard=0, puts=[no_partition]) == grpc.StatusCode.INVALID_ARGUMENT
    assert code("GetShardAssignments", namespace="other") == grpc.StatusCode.NOT_FOUND
    assert code("Read", shard=0, gets=[{"key": "k", "comparison_type": 9}]) == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    for timeout in (1_999, 300_001):
        assert code("CreateSession", shard=0, session_timeout_ms=timeout) == (
            grpc.StatusCode.INVALID_ARGUMENT
        )
    assert code("CloseSession", shard=0, session_id=12345) == grpc.StatusCode.NOT_FOUND


def test_write_stream_answers_each_request_in_order(raw: RawStub):
    write = raw.channel.stream_stream(
        f"/{schema.SERVICE}/WriteStream",
        request_serializer=schema.message("WriteRequest").SerializeToString,
        response_deserializer=schema.message("WriteResponse").FromString,
    )
    requests = [
        schema.message("WriteRequest")(shard=0, puts=[{"key": "/s/a", "value": b"1"}]),
        schema.message("WriteRequest")(shard=0, puts=[{"key": "/s/a", "value": b"2"}]),
        schema.message("WriteRequest")(shard=0, deletes=[{"key": "/s/a"}, {"key": "/s/b"}]),
    ]
    first, second, third = list(write(iter(requests)))
    assert first.puts[0].version.modifications_count == 0
    assert second.puts[0].version.modifications_count == 1
    assert second.puts[0].version.version_id > first.puts[0].version.version_id
    assert [d.status for d in third.deletes] == [0, 1]  # OK, KEY_NOT_FOUND
