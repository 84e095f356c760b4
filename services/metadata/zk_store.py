"""The ZooKeeper adapter of the `MetadataStore` port: with `zk_wire` (the requests aiozk
lacks: createContainer, multiRead), the only module that imports aiozk.

It sends aiozk's low-level requests itself, so that data and stat come back in one round trip
and aiozk's unbounded per-path stat cache is never filled. Every call is bounded by a timeout,
and every aiozk failure is mapped to a typed error; uncertain outcomes become
`StoreUnavailable`, never `NoNode`.

Writes are never resent after a connection loss: a resent create, set or delete could report
`NodeExists`, `VersionConflict` or `NoNode` for our own first attempt. Reads are resent on the
new connection until the timeout. `get_many` reads many znodes per round trip (multiRead).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import aiozk
from aiozk import exc as zk_exc
from aiozk import protocol as zk_protocol
from aiozk.states import States

from services.metadata.errors import (
    MetadataError,
    NodeExists,
    NoNode,
    NotEmpty,
    StoreUnavailable,
    VersionConflict,
)
from services.metadata.store import ANY_VERSION, Stat, Versioned, WatchEvent
from services.metadata.zk_wire import (
    CreateContainerRequest,
    MultiReadRequest,
    MultiReadResponse,
)

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_REQUEST_TIMEOUT = 10.0
MULTI_READ_CHUNK = 256
"""Paths per multiRead request: keeps each request and reply small (ledger znodes are a few
hundred bytes) and lets chunks of one large batch travel in parallel."""

_UNAVAILABLE = (
    zk_exc.ConnectError,
    zk_exc.SessionLost,
    zk_exc.SessionExpired,
    zk_exc.ConnectionLoss,
    zk_exc.OperationTimeout,
    zk_exc.FailedRetry,
    zk_exc.TimeoutError,
    zk_exc.UnfinishedRead,
    zk_exc.UnknownSession,
    zk_exc.SessionMoved,
    zk_exc.InvalidStateTransition,
    zk_exc.NotReadOnly,
    OSError,
)
_DATA_EVENTS = {
    zk_protocol.WatchEvent.DATA_CHANGED: WatchEvent.CHANGED,
    zk_protocol.WatchEvent.DELETED: WatchEvent.DELETED,
}
_EXISTS_EVENTS = {**_DATA_EVENTS, zk_protocol.WatchEvent.CREATED: WatchEvent.CREATED}


class _NoWriteResend(aiozk.RetryPolicy):  # type: ignore[misc]
    """Retry reads after a connection loss; fail writes at once (their outcome is unknown)."""

    def __init__(self) -> None:
        super().__init__(try_limit=None, sleep_func=lambda _timings: 0.05)

    async def enforce(self, request: Any = None) -> None:
        if getattr(request, "writes_data", False) and self.timings.get(id(request)):
            self.clear(request)
            raise zk_exc.FailedRetry
        await super().enforce(request)


def _stat(raw: Any) -> Stat:
    return Stat(
        version=raw.version,
        ctime_ms=raw.created,
        mtime_ms=raw.modified,
        czxid=raw.created_zxid,
        mzxid=raw.last_modified_zxid,
        num_children=raw.num_children,
        data_length=raw.data_length,
        ephemeral_owner=raw.ephemeral_owner,
    )


def _versioned(data: bytes | None, raw: Any) -> Versioned:
    return Versioned(
        data=data or b"",
        version=raw.version,
        ctime_ms=raw.created,
        mtime_ms=raw.modified,
        czxid=raw.created_zxid,
        mzxid=raw.last_modified_zxid,
    )


def _retarget(error: MetadataError, path: str) -> MetadataError:
    """The same failure, named for `path` (a failed chunk fails each of its paths)."""
    if isinstance(error, StoreUnavailable):
        return StoreUnavailable(path, error.reason)
    return MetadataError(path, str(error).partition(": ")[2] or str(error))


class ZkMetadataStore:
    """`MetadataStore` on a ZooKeeper session. Create with `ZkMetadataStore.connect(...)`."""

    def __init__(self, client: aiozk.ZKClient, *, request_timeout: float, session_timeout: float):
        self._client = client
        self._session = client.session
        self._retry: _NoWriteResend = client.session.retry_policy
        self._request_timeout = request_timeout
        self._session_timeout = session_timeout
        self._hooked_conn: object = None

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        servers: str,
        *,
        chroot: str | None = None,
        session_timeout: float = DEFAULT_SESSION_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        connect_timeout: float | None = None,
    ) -> AsyncIterator[ZkMetadataStore]:
        """Open a session to `servers` (`host:port,...`); close it on exit.

        `StoreUnavailable` if no session is established within `connect_timeout`
        (default: the request timeout).
        """
        client = aiozk.ZKClient(
            servers, chroot=chroot, session_timeout=session_timeout, retry_policy=_NoWriteResend()
        )
        store = cls(client, request_timeout=request_timeout, session_timeout=session_timeout)
        try:
            await asyncio.wait_for(client.start(), connect_timeout or request_timeout)
        except (TimeoutError, *_UNAVAILABLE) as e:
            await store.close()
            raise StoreUnavailable(chroot or "/", f"cannot connect to {servers}: {e!r}") from e
        try:
            yield store
        finally:
            await store.close()

    async def close(self) -> None:
        """End the session; bounded, and immediate when the server is not reachable."""
        if self.connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._client.close(), self._request_timeout)
        self._abandon()

    def _abandon(self) -> None:
        """Stop aiozk's background tasks without talking to the server."""
        session = self._session
        session.closing = True
        for task in (session.repair_loop_task, session.heartbeat_task):
            if task is not None and not task.done():
                task.cancel()
        if session.heartbeat_handle is not None:
            session.heartbeat_handle.cancel()
        conn = session.conn
        if conn is not None and not conn.closing:
            conn.closing = True
            if conn.read_loop_task is not None:
                conn.read_loop_task.cancel()
            if conn.writer is not None:
                conn.writer.close()

    @property
    def last_zxid(self) -> int | None:
        zxid = self._session.last_zxid
        return int(zxid) if zxid is not None else None

    @property
    def connected(self) -> bool:
        return bool(self._session.state == States.CONNECTED)

    async def get(self, path: str) -> Versioned:
        response = await self._send(
            zk_protocol.GetDataRequest(path=self._abs(path), watch=False), path
        )
        return _versioned(response.data, response.stat)

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        """Data and stat of each path, read with `multiRead` (one round trip per chunk of
        `MULTI_READ_CHUNK` paths, the chunks in flight together).

        Per path, in order: the `Versioned`, None when the server said the znode does not
        exist, or the typed error that left it unknown (`StoreUnavailable` when the request
        got no answer; absence is never inferred from a failure). Store failures are reported
        per path, not raised.
        """
        chunks = [paths[i : i + MULTI_READ_CHUNK] for i in range(0, len(paths), MULTI_READ_CHUNK)]
        if len(chunks) == 1:
            return await self._multi_read(chunks[0])
        answers = await asyncio.gather(*(self._multi_read(chunk) for chunk in chunks))
        return [result for answer in answers for result in answer]

    async def _multi_read(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        try:
            full = [self._abs(path) for path in paths]
        except MetadataError:
            return await asyncio.gather(*(self._get_or_error(path) for path in paths))
        try:
            response: MultiReadResponse = await self._send(MultiReadRequest(full), paths[0])
        except MetadataError as e:
            return [_retarget(e, path) for path in paths]
        if response.malformed is not None or len(response.results) != len(paths):
            problem = response.malformed or f"{len(response.results)} results for {len(paths)}"
            return [MetadataError(path, problem) for path in paths]
        return [
            result if isinstance(result, Versioned) else self._read_error(result, path)
            for result, path in zip(response.results, paths, strict=True)
        ]

    async def _get_or_error(self, path: str) -> Versioned | MetadataError | None:
        try:
            return await self.get(path)
        except NoNode:
            return None
        except MetadataError as e:
            return e

    def _read_error(self, code: int, path: str) -> MetadataError | None:
        """One read's error code: NONODE is absence (of this path only), any other is typed."""
        error = zk_exc.get_response_error(code)
        return None if isinstance(error, zk_exc.NoNode) else self._mapped(error, path)

    async def get_and_watch(self, path: str) -> tuple[Versioned, asyncio.Future[WatchEvent]]:
        full = self._abs(path)
        fired, unregister = self._register_watch(full, _DATA_EVENTS)
        try:
            response = await self._send(zk_protocol.GetDataRequest(path=full, watch=True), path)
        except BaseException:
            unregister()
            fired.cancel()
            raise
        return _versioned(response.data, response.stat), fired

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        full = self._abs(path)
        fired, unregister = self._register_watch(full, _EXISTS_EVENTS)
        try:
            stat = await self._exists(full, path, watch=True)
        except BaseException:
            unregister()
            fired.cancel()
            raise
        return stat, fired

    async def get_children(self, path: str) -> list[str]:
        request = zk_protocol.GetChildrenRequest(path=self._abs(path), watch=False)
        response = await self._send(request, path)
        return list(response.children)

    async def exists(self, path: str) -> Stat | None:
        return await self._exists(self._abs(path), path, watch=False)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
    ) -> Stat:
        try:
            return await self._create(path, data, container=False)
        except NoNode:
            if not make_parents:
                raise
        await self._create_parents(path, container=container_parents)
        return await self._create(path, data, container=False)

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        request = zk_protocol.SetDataRequest(path=self._abs(path), data=data, version=version)
        response = await self._send(request, path, version=version)
        return int(response.stat.version)

    async def delete(self, path: str, *, version: int) -> None:
        request = zk_protocol.DeleteRequest(path=self._abs(path), version=version)
        await self._send(request, path, version=version)

    async def _exists(self, full: str, path: str, *, watch: bool) -> Stat | None:
        try:
            response = await self._send(zk_protocol.ExistsRequest(path=full, watch=watch), path)
        except NoNode:
            return None
        return _stat(response.stat)

    async def _create(self, path: str, data: bytes, *, container: bool) -> Stat:
        request_class = CreateContainerRequest if container else zk_protocol.Create2Request
        request = request_class(
            path=self._abs(path), data=data, acl=[zk_protocol.UNRESTRICTED_ACCESS]
        )
        request.set_flags(ephemeral=False, sequential=False, container=container)
        response = await self._send(request, path)
        return _stat(response.stat)

    async def _create_parents(self, path: str, *, container: bool) -> None:
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            with contextlib.suppress(NodeExists):
                await self._create(parent, b"", container=container)

    def _abs(self, path: str) -> str:
        if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
            raise MetadataError(path, "not an absolute znode path")
        if not self._client.chroot:
            return path  # already normal (checked above); aiozk's split/join costs µs per path
        return str(self._client.normalize_path(path))

    async def _send(self, request: Any, path: str, *, version: int = ANY_VERSION) -> Any:
        """Send one request, bounded by the timeout, with every failure mapped."""
        self._hook_connection()
        try:
            # asyncio.timeout, not wait_for: no extra task per request on the hot read path.
            async with asyncio.timeout(self._request_timeout):
                return await self._session.send(request)
        except (zk_exc.ZKError, TimeoutError, *_UNAVAILABLE) as e:
            raise self._mapped(e, path, version) from e
        finally:
            self._retry.clear(request)

    def _mapped(self, error: Exception, path: str, version: int = ANY_VERSION) -> MetadataError:
        """The typed error for an aiozk failure (or for one read's error code)."""
        if isinstance(error, zk_exc.NoNode):
            return NoNode(path)
        if isinstance(error, zk_exc.NodeExists):
            return NodeExists(path)
        if isinstance(error, zk_exc.BadVersion):
            return VersionConflict(path, version)
        if isinstance(error, zk_exc.NotEmpty):
            return NotEmpty(path)
        if isinstance(error, TimeoutError):
            return StoreUnavailable(path, f"no answer within {self._request_timeout}s")
        if isinstance(error, _UNAVAILABLE):
            return StoreUnavailable(path, f"{type(error).__name__}: {error}")
        return MetadataError(path, f"ZooKeeper error {type(error).__name__}: {error}")

    def _hook_connection(self) -> None:
        """Fail in-flight requests as soon as the server closes the socket.

        aiozk's read loop ends silently when the socket closes; the loss would only be noticed
        by the next heartbeat. Aborting the connection fails pending requests with
        ConnectError, which moves the session to SUSPENDED and starts its repair.
        """
        conn = self._session.conn
        if conn is None or conn is self._hooked_conn or conn.read_loop_task is None:
            return
        self._hooked_conn = conn

        def on_read_loop_end(_task: asyncio.Task[None]) -> None:
            if not conn.closing:
                conn.abort()
                if self._session.state == States.CONNECTED:
                    self._session.state.transition_to(States.SUSPENDED)

        conn.read_loop_task.add_done_callback(on_read_loop_end)

    def _register_watch(
        self, full: str, events: dict[int, WatchEvent]
    ) -> tuple[asyncio.Future[WatchEvent], Callable[[], None]]:
        """A future fired once by the first matching ZK event or by a connection/session loss,
        and the (idempotent) function that removes its callbacks."""
        fired: asyncio.Future[WatchEvent] = asyncio.get_running_loop().create_future()

        def fire(event: WatchEvent) -> None:
            if not fired.done():
                fired.set_result(event)

        callbacks: list[tuple[int, Callable[[str], None]]] = []
        for zk_type, event in events.items():
            callback = _bind(fire, event)
            self._session.add_watch_callback(zk_type, full, callback)
            callbacks.append((zk_type, callback))
        lost = self._session.state.wait_for(States.SUSPENDED, States.LOST)
        lost.add_done_callback(lambda _f: fire(WatchEvent.CONNECTION_LOST))

        def unregister() -> None:
            for zk_type, callback in callbacks:
                if callback in self._session.watch_callbacks.get((zk_type, full), ()):
                    self._session.remove_watch_callback(zk_type, full, callback)
            for state in (States.SUSPENDED, States.LOST):
                self._session.state.futures[state].discard(lost)
            lost.cancel()

        fired.add_done_callback(lambda _f: unregister())
        return fired, unregister


def _bind(fire: Callable[[WatchEvent], None], event: WatchEvent) -> Callable[[str], None]:
    return lambda _path: fire(event)
