"""What the adapter takes from the `oxia` client (0.2.1, pinned): opening a client with a
bounded wait, the shard of a key, the per-shard sessions, and records turned into the port's
`Stat` and `Versioned`. The only module besides `_notifications` that touches the client's
internals; they are named here so that an upgrade of the client is checked in one place.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import grpc
from oxia.client import Client, _check_status
from oxia.internal.connection_pool import ConnectionPool
from oxia.internal.proto.io.streamnative.oxia import proto as _pb
from oxia.internal.service_discovery import ServiceDiscovery
from oxia.internal.sessions import SessionManager

from services.metadata.store import Stat, Versioned

_BARRIER_LOCK = threading.Lock()


class _FirstComerBarrier:
    """`ServiceDiscovery.__init__` starts the thread that reads the shard assignments before
    it creates `_init_barrier`, which that thread waits on after the first answer; a server
    that answers first kills the thread (AttributeError) and the constructor waits in vain.
    As a data descriptor, the barrier is made by whichever thread reads or assigns it first,
    and the other gets the same one."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with _BARRIER_LOCK:
            return obj.__dict__.setdefault("_init_barrier", threading.Barrier(2))

    def __set__(self, obj: Any, value: threading.Barrier) -> None:
        with _BARRIER_LOCK:
            obj.__dict__.setdefault("_init_barrier", value)


def _close_start_up_race() -> None:
    # Another copy of the same fix may be installed already (the client's own test harness):
    # both make the barrier the same way, so whichever is in place is kept.
    if "_init_barrier" not in ServiceDiscovery.__dict__:
        ServiceDiscovery._init_barrier = _FirstComerBarrier()


class _StartBarrier:
    """The constructor's wait for the first shard assignments. The client's assignments
    thread waits on `_init_barrier` after *every* answer, so after a lost stream (the server
    restarted) its next answer would wait forever for a second party: the thread then never
    reads another assignment and `close()` never returns from joining it. Passed once, this
    barrier lets every later wait through."""

    def __init__(self) -> None:
        self._barrier = threading.Barrier(2)
        self._passed = False

    def wait(self, timeout: float | None = None) -> int:
        if self._passed:
            return 0
        index = self._barrier.wait(timeout)
        self._passed = True
        return index


class _StartBarrierSlot(_FirstComerBarrier):
    """`_FirstComerBarrier`'s first-comer rule, making a `_StartBarrier`."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with _BARRIER_LOCK:
            return obj.__dict__.setdefault("_init_barrier", _StartBarrier())

    def __set__(self, obj: Any, value: Any) -> None:
        # The constructor assigns a plain Barrier(2); the one made first is kept either way.
        with _BARRIER_LOCK:
            obj.__dict__.setdefault("_init_barrier", _StartBarrier())


class _Discovery(ServiceDiscovery):  # type: ignore[misc]
    """The client's service discovery, whose assignments thread ends quietly when its
    connection pool is closed before the first answer came (a failed connect): the client's
    thread would die there with an uncaught error from the closed channel. Its start barrier
    is passed once only (`_StartBarrier`)."""

    _init_barrier = _StartBarrierSlot()

    def get_assignments(self) -> None:
        with contextlib.suppress(ValueError):  # grpc: "Cannot invoke RPC on closed channel"
            super().get_assignments()


def open_client(
    address: str,
    namespace: str,
    session_timeout_ms: int,
    init_timeout: float,
    on_session_closed: Callable[[Any], None],
) -> Any:
    """An `oxia.Client`, built as its constructor builds it but waiting at most
    `init_timeout` seconds for the shard assignments (the constructor waits 30 s), and with
    `on_session_closed(session)` called whenever one of its per-shard sessions ends (expired
    locally after missed keepalives, or closed)."""
    _close_start_up_race()
    pool = ConnectionPool()
    try:
        discovery = _Discovery(address, pool, namespace, init_timeout=init_timeout)
    except BaseException:
        # The assignments thread ends once its channel is closed.
        pool.close()
        raise
    # The client's own heartbeat is max(timeout / 10, 2 s), capped just below the timeout:
    # with a short timeout a session can expire between two heartbeats. Three per timeout.
    heartbeat_ms = max(session_timeout_ms // 3, 1)
    sessions = SessionManager(
        discovery, session_timeout_ms, None, heartbeat_interval_ms=heartbeat_ms
    )
    forward = sessions.on_session_closed

    def closed(session: Any) -> None:
        forward(session)
        on_session_closed(session)

    # Sessions take this bound attribute when they are made (`get_session`).
    sessions.on_session_closed = closed
    client = Client.__new__(Client)
    client._closed = False
    client._connections = pool
    client._service_discovery = discovery
    client._session_manager = sessions
    return client


def shard_of(client: Any, key: str) -> int:
    """The shard that holds `key` (routing is a local hash of the key)."""
    return int(client._service_discovery.get_shard(key).shard)


def shards(client: Any) -> list[tuple[int, Any]]:
    """Every shard of the namespace with the stub of its leader."""
    return list(client._service_discovery.get_all_shards())


def stub_of(client: Any, shard: int) -> Any:
    return client._service_discovery.get_stub(shard)


def delete_in_one_request(
    client: Any, shard: int, deletes: Sequence[tuple[str, int | None]]
) -> list[Exception | None]:
    """Deletes of keys of one shard, each at its expected version id (None: any), in one
    write request: Oxia applies a request's deletes in order, each with a status of its
    own, as the client's `delete` applies its one (it sends one delete a request). Per
    key, None when deleted, else the client's error for its status (`KeyNotFound`,
    `UnexpectedVersionId`, ...). A failed request raises: then no outcome is known."""
    request = _pb.WriteRequest(
        shard=shard,
        deletes=[_pb.DeleteRequest(key=key, expected_version_id=v) for key, v in deletes],
    )
    response = stub_of(client, shard).write(request)
    if len(response.deletes) != len(deletes):
        raise RuntimeError(f"{len(response.deletes)} delete statuses for {len(deletes)} deletes")
    outcomes: list[Exception | None] = []
    for answer in response.deletes:
        try:
            _check_status(answer.status)
        except Exception as e:
            outcomes.append(e)
        else:
            outcomes.append(None)
    return outcomes


def live_session_id(client: Any, shard: int) -> int | None:
    """The id of this client's live session on `shard`, if it has one."""
    session = client._session_manager.sessions_by_shard.get(shard)
    if session is None or session.is_closed():
        return None
    return int(session.session_id())


def end_session(client: Any, shard: int) -> None:
    """Drop this client's session on `shard` (the server no longer knows it): the next
    ephemeral put there opens a new one."""
    session = client._session_manager.sessions_by_shard.get(shard)
    if session is not None:
        session.close()


def probe_session(client: Any, shard: int) -> None:
    """Ask the server whether our session on `shard` is still alive (the client's keepalive
    would take a whole session timeout to give up), and end it here if it is not."""
    session = client._session_manager.sessions_by_shard.get(shard)
    if session is None:
        return
    try:
        stub_of(client, shard).keep_alive(
            _pb.SessionHeartbeat(shard=shard, session_id=session.session_id())
        )
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.NOT_FOUND:
            end_session(client, shard)


def owner(client: Any, key: str, version: Any, *, ours: int) -> int:
    """A record's `ephemeral_owner`: 0 when persistent, `ours` when it belongs to the
    client's live session on its shard, else Oxia's session id plus one (Oxia's ids start at
    0 on each shard, and 0 means persistent)."""
    record_session = version.session_id()
    if record_session is None:
        return 0
    if live_session_id(client, shard_of(client, key)) == record_session:
        return ours
    return int(record_session) + 1


def _ms(moment: Any) -> int:
    # The client turns the server's milliseconds into a local datetime; this undoes it.
    return round(float(moment.timestamp()) * 1000)


def to_stat(version: Any, value: bytes, *, num_children: int, owner: int) -> Stat:
    created = _ms(version.created_timestamp())
    return Stat(
        version=int(version.version_id()),
        ctime_ms=created,
        mtime_ms=_ms(version.modified_timestamp()),
        czxid=created,
        mzxid=int(version.version_id()),
        num_children=num_children,
        data_length=len(value),
        ephemeral_owner=owner,
    )


def to_versioned(version: Any, value: bytes | None) -> Versioned:
    created = _ms(version.created_timestamp())
    return Versioned(
        data=value or b"",
        version=int(version.version_id()),
        ctime_ms=created,
        mtime_ms=_ms(version.modified_timestamp()),
        czxid=created,
        mzxid=int(version.version_id()),
        cversion=int(version.modifications_count()),
    )
