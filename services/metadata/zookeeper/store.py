"""The ZooKeeper adapter of the `MetadataStore` port: with `wire` (the requests aiozk
lacks: createContainer, multiRead, multi of deletes), `_session` (retries, connection
loss, watches) and `_security` (authentication, TLS, ACLs), the only modules that import
aiozk.

It sends aiozk's low-level requests itself, so that data and stat come back in one round trip
and aiozk's unbounded per-path stat cache is never filled. Every call is bounded by a timeout,
and every aiozk failure is mapped to a typed error; uncertain outcomes become
`StoreUnavailable`, never `NoNode`.

Writes are never resent after a connection loss: a resent create, set or delete could report
`NodeExists`, `VersionConflict` or `NoNode` for our own first attempt. Reads are resent on the
new connection until the timeout. `get_many` reads many znodes per round trip (multiRead);
`delete_many` deletes many per round trip (multi).
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

from services.core.zk_security import ZooKeeperSecurity
from services.metadata.acl import AclEntry, ZnodeAcl, tombstone_acl
from services.metadata.errors import (
    AuthenticationFailed,
    MetadataError,
    NodeExists,
    NoNode,
    NotAuthorized,
    NotEmpty,
    StoreUnavailable,
    Unsupported,
    VersionConflict,
)
from services.metadata.store import ANY_VERSION, Stat, Versioned, WatchEvent
from services.metadata.zookeeper._security import (
    DigestAuth,
    TlsDialer,
    acl_entries,
    tls_context,
    zk_acl,
)
from services.metadata.zookeeper._session import (
    CHILD_EVENTS,
    DATA_EVENTS,
    EXISTS_EVENTS,
    UNAVAILABLE,
    ConnectionGuard,
    EventTap,
    NoWriteResend,
    register_watch,
)
from services.metadata.zookeeper.wire import (
    AddWatchRequest,
    CreateContainerRequest,
    MultiDeleteRequest,
    MultiDeleteResponse,
    MultiReadRequest,
    MultiReadResponse,
)

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_REQUEST_TIMEOUT = 10.0
MULTI_READ_CHUNK = 256
"""Paths per multiRead request: keeps each request and reply small (ledger znodes are a few
hundred bytes) and lets chunks of one large batch travel in parallel."""
MULTI_DELETE_CHUNK = 256
"""Deletes per multi: bounds the request size and the rounds a chunk can take (one per
delete that fails)."""


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
        cversion=raw.child_version,
    )


def _retarget(error: MetadataError, path: str) -> MetadataError:
    """The same failure, named for `path` (a failed chunk fails each of its paths)."""
    if isinstance(error, StoreUnavailable):
        return StoreUnavailable(path, error.reason)
    if isinstance(error, Unsupported):
        return Unsupported(path, error.request)
    return MetadataError(path, str(error).partition(": ")[2] or str(error))


class ZkMetadataStore:
    """`MetadataStore` on a ZooKeeper session. Create with `ZkMetadataStore.connect(...)`."""

    def __init__(
        self,
        client: aiozk.ZKClient,
        *,
        request_timeout: float,
        session_timeout: float,
        security: ZooKeeperSecurity | None = None,
    ):
        security = security or ZooKeeperSecurity()
        self._client = client
        self._session = client.session
        self._retry: NoWriteResend = client.session.retry_policy
        self._request_timeout = request_timeout
        self._session_timeout = session_timeout
        self._guard = ConnectionGuard(client.session)
        self._tap: EventTap | None = None
        self.create_acl = tombstone_acl(security)
        """The ACL of every znode this store creates (only Tombstone's own znodes are)."""
        self._create_acl = zk_acl(self.create_acl)
        self._auth: DigestAuth | None = None
        if security.digest_user is not None:
            credential = f"{security.digest_user}:{security.digest_password}".encode()
            self._auth = DigestAuth(client.session, "digest", credential)
        self._tls: TlsDialer | None = None
        if security.tls is not None:
            self._tls = TlsDialer(client.session, tls_context(security.tls))

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
        security: ZooKeeperSecurity | None = None,
    ) -> AsyncIterator[ZkMetadataStore]:
        """Open a session to `servers` (`host:port,...`) with `security` (authentication,
        ACLs, TLS); close it on exit.

        `StoreUnavailable` if no session is established within `connect_timeout`
        (default: the request timeout); `AuthenticationFailed` when ZooKeeper refuses the
        authentication; `ZooKeeperRefused` before any connection when `security` asks for
        what the client cannot do (SASL).
        """
        if security is not None:
            security.check()
        client = aiozk.ZKClient(
            servers,
            chroot=chroot,
            session_timeout=session_timeout,
            retry_policy=NoWriteResend(),
            # aiozk creates a missing chroot itself on start: with our ACL too.
            default_acl=zk_acl(tombstone_acl(security or ZooKeeperSecurity())),
        )
        store = cls(
            client,
            request_timeout=request_timeout,
            session_timeout=session_timeout,
            security=security,
        )
        try:
            await asyncio.wait_for(client.start(), connect_timeout or request_timeout)
        except zk_exc.AuthFailed as e:
            await store.close()
            raise AuthenticationFailed(chroot or "/") from e
        except (TimeoutError, *UNAVAILABLE) as e:
            await store.close()
            reason = f"cannot connect to {servers}: {e!r}"
            if store._tls is not None and store._tls.last_error is not None:
                reason += f" (TLS: {store._tls.last_error})"
            raise StoreUnavailable(chroot or "/", reason) from e
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

    @property
    def session_id(self) -> int | None:
        """The current session's id (an ephemeral znode's `ephemeral_owner` when it is ours)."""
        session_id = self._session.session_id
        return int(session_id) if session_id else None

    async def wait_connected(self) -> None:
        """Return once the session is connected (unbounded: callers bound it)."""
        if not self.connected:
            await self._session.state.wait_for(States.CONNECTED)

    def connection_lost(self) -> asyncio.Future[None]:
        """A future done when the connection is next lost (suspended) or the session ends:
        from then on every watch may have missed events."""
        state = self._session.state
        lost: asyncio.Future[None] = state.wait_for(States.SUSPENDED, States.LOST)

        def forget(_future: asyncio.Future[None]) -> None:
            for waiting in (States.SUSPENDED, States.LOST):
                state.futures[waiting].discard(lost)

        lost.add_done_callback(forget)
        return lost

    async def add_recursive_watch(
        self, path: str, listener: Callable[[WatchEvent, str], None]
    ) -> None:
        """ZooKeeper's `addWatch` (PERSISTENT_RECURSIVE, ZooKeeper ≥ 3.6) on `path`:
        `listener(kind, znode path)` is called for every create, data change and delete at or
        below it, from now until the connection is lost. The watch does not survive a
        reconnect (call this again; events in between are not reported). `Unsupported` when
        the server is older than 3.6."""
        full = self._abs(path)
        if self._tap is None:
            self._tap = EventTap(self._session, self._client.chroot or "")
        self._tap.listen(full, listener)
        await self._send(AddWatchRequest(full), path)

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
        fired, unregister = register_watch(self._session, full, DATA_EVENTS)
        try:
            response = await self._send(zk_protocol.GetDataRequest(path=full, watch=True), path)
        except BaseException:
            unregister()
            fired.cancel()
            raise
        return _versioned(response.data, response.stat), fired

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        full = self._abs(path)
        fired, unregister = register_watch(self._session, full, EXISTS_EVENTS)
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

    async def get_children_and_watch(
        self, path: str
    ) -> tuple[list[str], asyncio.Future[WatchEvent]]:
        full = self._abs(path)
        fired, unregister = register_watch(self._session, full, CHILD_EVENTS)
        try:
            request = zk_protocol.GetChildrenRequest(path=full, watch=True)
            response = await self._send(request, path)
        except BaseException:
            unregister()
            fired.cancel()
            raise
        return list(response.children), fired

    async def exists(self, path: str) -> Stat | None:
        return await self._exists(self._abs(path), path, watch=False)

    async def sync(self, path: str) -> None:
        # The server answers a sync only once it has caught up with the leader as of the
        # request, and a session's replies and watch events come in order on one connection.
        await self._send(zk_protocol.SyncRequest(path=self._abs(path)), path)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Stat:
        """`ephemeral`: the znode lives as long as this session (parents never are)."""
        try:
            return await self._create(path, data, container=False, ephemeral=ephemeral)
        except NoNode:
            if not make_parents:
                raise
        await self._create_parents(path, container=container_parents)
        return await self._create(path, data, container=False, ephemeral=ephemeral)

    async def create_sequential(
        self,
        prefix: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        ephemeral: bool = False,
    ) -> tuple[str, Stat]:
        """The server names the znode, so a create that got no answer is never resent (a
        second znode could be made); its outcome is unknown (`StoreUnavailable`). An
        ephemeral one (ZooKeeper's EPHEMERAL_SEQUENTIAL) goes with this session."""
        try:
            return await self._create_sequential(prefix, data, ephemeral=ephemeral)
        except NoNode:
            if not make_parents:
                raise
        await self._create_parents(prefix, container=False)
        return await self._create_sequential(prefix, data, ephemeral=ephemeral)

    async def _create_sequential(
        self, prefix: str, data: bytes, *, ephemeral: bool
    ) -> tuple[str, Stat]:
        full = self._abs(prefix)
        request = zk_protocol.Create2Request(path=full, data=data, acl=self._create_acl)
        request.set_flags(ephemeral=ephemeral, sequential=True, container=False)
        response = await self._send(request, prefix)
        # The reply's path is the server's (a chroot included): keep only the new name.
        name = str(response.path).rsplit("/", 1)[-1]
        return f"{prefix.rsplit('/', 1)[0]}/{name}", _stat(response.stat)

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        request = zk_protocol.SetDataRequest(path=self._abs(path), data=data, version=version)
        response = await self._send(request, path, version=version)
        return int(response.stat.version)

    async def delete(self, path: str, *, version: int) -> None:
        request = zk_protocol.DeleteRequest(path=self._abs(path), version=version)
        await self._send(request, path, version=version)

    async def delete_many(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        """Conditional deletes of (path, version) pairs with `multi` (one transaction per chunk
        of `MULTI_DELETE_CHUNK`, the chunks in flight together).

        Per item, in order: None when this call deleted the znode, else why it did not:
        `NoNode` or `VersionConflict` (the server said so), another typed error the server gave
        for that delete (`NotEmpty`...), `StoreUnavailable` when the outcome is unknown (no
        answer: the delete may or may not have been applied), `Unsupported` when the server
        refused `multi` (nothing was applied). Store failures are reported per item, not raised.

        A multi is all or nothing: when one delete fails, none is applied and only the failing
        one is decided. The undecided ones are sent again in a new multi, so a chunk takes at
        most one round per delete.
        """
        step = MULTI_DELETE_CHUNK
        chunks = [items[i : i + step] for i in range(0, len(items), step)]
        if len(chunks) == 1:
            return await self._multi_delete(chunks[0])
        answers = await asyncio.gather(*(self._multi_delete(chunk) for chunk in chunks))
        return [outcome for answer in answers for outcome in answer]

    async def _multi_delete(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        decided: dict[int, MetadataError | None] = {}
        undecided: dict[int, str] = {}  # item index -> absolute path, in item order
        for index, (path, _version) in enumerate(items):
            try:
                undecided[index] = self._abs(path)
            except MetadataError as e:
                decided[index] = e
        while undecided:
            settled = await self._delete_round(items, undecided)
            decided.update(settled)
            for index in settled:
                del undecided[index]
        # A KeyError here would be a bug; never let a gap read as "deleted".
        return [decided[index] for index in range(len(items))]

    async def _delete_round(
        self, items: Sequence[tuple[str, int]], undecided: dict[int, str]
    ) -> dict[int, MetadataError | None]:
        """One multi of the undecided deletes: the items it decided (at least one)."""
        indexes = list(undecided)
        request = MultiDeleteRequest([(undecided[i], items[i][1]) for i in indexes])
        try:
            response: MultiDeleteResponse = await self._send(request, items[indexes[0]][0])
        except MetadataError as e:
            return {i: _retarget(e, items[i][0]) for i in indexes}
        try:
            failure = response.failure(len(indexes))
        except ValueError as e:
            return {i: MetadataError(items[i][0], f"multi: {e}") for i in indexes}
        if failure is None:
            return dict.fromkeys(indexes)  # every delete applied
        position, code = failure
        index = indexes[position]
        path, version = items[index]
        return {index: self._code_error(code, path, version)}

    def _code_error(self, code: int, path: str, version: int) -> MetadataError:
        """The typed error for a ZooKeeper error code the server gave for `path`."""
        error_class = zk_exc.response_error_xref.get(code)
        if error_class is None:
            return MetadataError(path, f"ZooKeeper error code {code}")
        return self._mapped(error_class(), path, version)

    async def _exists(self, full: str, path: str, *, watch: bool) -> Stat | None:
        try:
            response = await self._send(zk_protocol.ExistsRequest(path=full, watch=watch), path)
        except NoNode:
            return None
        return _stat(response.stat)

    async def _create(
        self, path: str, data: bytes, *, container: bool, ephemeral: bool = False
    ) -> Stat:
        request_class = CreateContainerRequest if container else zk_protocol.Create2Request
        request = request_class(path=self._abs(path), data=data, acl=self._create_acl)
        request.set_flags(ephemeral=ephemeral, sequential=False, container=container)
        response = await self._send(request, path)
        return _stat(response.stat)

    async def _create_parents(self, path: str, *, container: bool) -> None:
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            with contextlib.suppress(NodeExists):
                await self._create(parent, b"", container=container)

    async def get_acl(self, path: str) -> ZnodeAcl:
        """The znode's ACL, its ACL version (`aversion`, for `set_acl`) and child count."""
        response = await self._send(zk_protocol.GetACLRequest(path=self._abs(path)), path)
        stat = response.stat
        return ZnodeAcl(acl_entries(response.acl), int(stat.acl_version), int(stat.num_children))

    async def set_acl(self, path: str, acl: Sequence[AclEntry], *, version: int) -> None:
        """Replace the znode's ACL if its ACL version is still `version`."""
        request = zk_protocol.SetACLRequest(path=self._abs(path), acl=zk_acl(acl), version=version)
        await self._send(request, path, version=version)

    def _abs(self, path: str) -> str:
        if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
            raise MetadataError(path, "not an absolute znode path")
        if not self._client.chroot:
            return path  # already normal (checked above); aiozk's split/join costs µs per path
        return str(self._client.normalize_path(path))

    async def _send(self, request: Any, path: str, *, version: int = ANY_VERSION) -> Any:
        """Send one request, bounded by the timeout, with every failure mapped."""
        if self._auth is not None and self._auth.failure is not None:
            raise AuthenticationFailed(path)
        self._guard.hook()
        conn = self._session.conn
        try:
            # asyncio.timeout, not wait_for: no extra task per request on the hot read path.
            async with asyncio.timeout(self._request_timeout):
                return await self._session.send(request)
        except (zk_exc.ZKError, TimeoutError, *UNAVAILABLE) as e:
            if isinstance(e, zk_exc.Unimplemented):
                # ZooKeeper closes the connection after refusing an opcode: leave it now, so
                # the next request waits for a new one instead of meeting a closed socket.
                if conn is not None:
                    self._guard.drop(conn)
                raise Unsupported(path, str(request)) from e
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
        if isinstance(error, zk_exc.NoAuth):
            return NotAuthorized(path)
        if isinstance(error, zk_exc.AuthFailed) or (
            self._auth is not None and self._auth.failure is not None
        ):
            return AuthenticationFailed(path)
        if isinstance(error, TimeoutError):
            return StoreUnavailable(path, f"no answer within {self._request_timeout}s")
        if isinstance(error, UNAVAILABLE):
            return StoreUnavailable(path, f"{type(error).__name__}: {error}")
        return MetadataError(path, f"ZooKeeper error {type(error).__name__}: {error}")
