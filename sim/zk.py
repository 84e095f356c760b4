"""In-memory ZooKeeper: one server state, one session per service, behind `MetadataStore`.

Modelled as ZooKeeper behaves (and as `services.metadata.zookeeper.store` relies on):
- every write bumps the zxid; `set` and `delete` compare the version (CAS); `-1` is any;
- a delete of a znode with children fails (`NotEmpty`); `multi` is all or nothing and
  reports the first failing op (the adapter retries the undecided ones, as here);
- one-shot watches fire on the server at the write, so a session sees the event before the
  answer to any later read; a lost connection or an expired session fires every watch of the
  session with `CONNECTION_LOST`;
- persistent recursive watches (ZooKeeper 3.6 `addWatch`, PERSISTENT_RECURSIVE): every
  create, data change and delete at or below the path calls the session's listener at the
  write (never removed by firing); lost with the connection like the one-shot watches (the
  client adds them again after reconnecting);
- sessions have ids; an ephemeral znode belongs to its session and is deleted when the session
  expires: some connection losses are expiries (a new session id, the ephemerals gone), and a
  session whose process died expires `SESSION_TIMEOUT` virtual seconds later;
- a lost connection leaves a write's outcome unknown: `Fault.AFTER` applies it, then raises;
- a path with a `.` or `..` segment is not resolved: it names no znode (reads and deletes
  answer "no such znode"), and a `setData` on it is refused (BadArguments).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from services.metadata.errors import (
    MetadataError,
    NodeExists,
    NoNode,
    NotEmpty,
    StoreUnavailable,
    VersionConflict,
)
from services.metadata.store import ANY_VERSION, Stat, Versioned, WatchEvent
from sim.scheduler import Fault, Scheduler

_T = TypeVar("_T")
Listener = Callable[[WatchEvent, str], None]

SESSION_TIMEOUT = 6.0
"""Virtual seconds after its process died until a session expires (its ephemerals go)."""
EXPIRY_SHARE = 0.25
"""Of the connection losses, the share that are session expiries."""


@dataclass
class _Node:
    data: bytes
    version: int
    ctime_ms: int
    mtime_ms: int
    czxid: int
    mzxid: int
    cversion: int = 0
    ephemeral_owner: int = 0
    children: dict[str, None] = field(default_factory=dict)
    """Insertion-ordered (a dict): iteration never depends on string hashing."""


def _parent(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


class ZooKeeper:
    """The server's state (durable: kept across crashes of the services)."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.zxid = 0
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0, 0, 0, 0)}
        self._data_watches: dict[str, list[tuple[Session, asyncio.Future[WatchEvent]]]] = {}
        self._child_watches: dict[str, list[tuple[Session, asyncio.Future[WatchEvent]]]] = {}
        self._recursive: list[tuple[Session, str, Listener]] = []
        """Persistent recursive watches, in the order they were added."""
        self.next_session = 0x1000
        self.on_write: Callable[[str, bytes | None], None] = lambda path, data: None
        """Called after every create, set and delete (data None) with the path."""
        self.on_delete: Callable[[str, str], None] = lambda path, by: None
        """Called before a znode is deleted, with who deletes it."""
        self.on_request: Callable[[str, str], None] = lambda path, by: None
        """Called with every path a session's request names, and the session's name, before
        the request is sent: what the services ask of ZooKeeper (for the names check)."""

    # --- direct access (the simulated Pulsar cluster and the checks; no faults) ----------

    def stat(self, path: str) -> Stat | None:
        node = self.nodes.get(path)
        if node is None:
            return None
        return Stat(
            node.version,
            node.ctime_ms,
            node.mtime_ms,
            node.czxid,
            node.mzxid,
            len(node.children),
            len(node.data),
            node.ephemeral_owner,
        )

    def versioned(self, path: str) -> Versioned:
        node = self.nodes.get(path)
        if node is None:
            raise NoNode(path)
        return Versioned(
            node.data,
            node.version,
            node.ctime_ms,
            node.mtime_ms,
            node.czxid,
            node.mzxid,
            node.cversion,
        )

    def create(
        self, path: str, data: bytes = b"", *, make_parents: bool = False, ephemeral_owner: int = 0
    ) -> Stat:
        if path in self.nodes:
            raise NodeExists(path)
        parent = _parent(path)
        if parent not in self.nodes:
            if not make_parents:
                raise NoNode(parent)
            self.create(parent, b"", make_parents=True)
        self.zxid += 1
        now = self.sched.now_ms()
        self.nodes[path] = _Node(data, 0, now, now, self.zxid, self.zxid, 0, ephemeral_owner)
        p = self.nodes[parent]
        p.children[path.rsplit("/", 1)[1]] = None
        p.cversion += 1
        self._fire(self._data_watches, path, WatchEvent.CREATED)
        self._fire_recursive(path, WatchEvent.CREATED)
        self._fire(self._child_watches, parent, WatchEvent.CHANGED)
        self.on_write(path, data)
        stat = self.stat(path)
        assert stat is not None
        return stat

    def create_sequential(
        self, prefix: str, data: bytes, *, make_parents: bool, ephemeral_owner: int = 0
    ) -> str:
        parent = _parent(prefix)
        if parent not in self.nodes:
            if not make_parents:
                raise NoNode(parent)
            self.create(parent, b"", make_parents=True)
        path = f"{prefix}{self.nodes[parent].cversion:010d}"
        self.create(path, data, ephemeral_owner=ephemeral_owner)
        return path

    def set(self, path: str, data: bytes, *, version: int) -> int:
        if any(segment in (".", "..") for segment in path.split("/")):
            # The server validates the path of a setData (reads and deletes of such a path
            # answer "no such znode": it names no znode).
            raise MetadataError(path, "ZooKeeper error BadArguments: BadArguments")
        node = self.nodes.get(path)
        if node is None:
            raise NoNode(path)
        if version != ANY_VERSION and node.version != version:
            raise VersionConflict(path, version)
        self.zxid += 1
        node.data, node.version = data, node.version + 1
        node.mtime_ms, node.mzxid = self.sched.now_ms(), self.zxid
        self._fire(self._data_watches, path, WatchEvent.CHANGED)
        self._fire_recursive(path, WatchEvent.CHANGED)
        self.on_write(path, data)
        return node.version

    def check_delete(self, path: str, version: int) -> MetadataError | None:
        node = self.nodes.get(path)
        if node is None:
            return NoNode(path)
        if version != ANY_VERSION and node.version != version:
            return VersionConflict(path, version)
        if node.children:
            return NotEmpty(path)
        return None

    def delete(self, path: str, *, version: int, by: str = "") -> None:
        error = self.check_delete(path, version)
        if error is not None:
            raise error
        self.on_delete(path, by)
        self.zxid += 1
        del self.nodes[path]
        parent = self.nodes[_parent(path)]
        del parent.children[path.rsplit("/", 1)[1]]
        parent.cversion += 1  # "the number of changes to the children" (see docs: a gap)
        self._fire(self._data_watches, path, WatchEvent.DELETED)
        self._fire(self._child_watches, path, WatchEvent.DELETED)
        self._fire(self._child_watches, _parent(path), WatchEvent.CHANGED)
        self._fire_recursive(path, WatchEvent.DELETED)
        self.on_write(path, None)

    def multi_delete(
        self, items: Sequence[tuple[str, int]], by: str = ""
    ) -> tuple[int, MetadataError] | None:
        """All or nothing: the first failing delete and its error, judged against the state
        the earlier deletes of the multi leave (nothing applied then), or None."""
        gone: set[str] = set()
        for index, (path, version) in enumerate(items):
            node = self.nodes.get(path)
            if node is None or path in gone:
                return index, NoNode(path)
            if version != ANY_VERSION and node.version != version:
                return index, VersionConflict(path, version)
            if any(f"{path}/{child}" not in gone for child in node.children):
                return index, NotEmpty(path)
            gone.add(path)
        for path, version in items:
            self.delete(path, version=version, by=by)
        return None

    # --- watches ---------------------------------------------------------------------------

    def watch_data(self, session: Session, path: str) -> asyncio.Future[WatchEvent]:
        return self._arm(self._data_watches, session, path)

    def watch_children(self, session: Session, path: str) -> asyncio.Future[WatchEvent]:
        return self._arm(self._child_watches, session, path)

    def _arm(
        self,
        table: dict[str, list[tuple[Session, asyncio.Future[WatchEvent]]]],
        session: Session,
        path: str,
    ) -> asyncio.Future[WatchEvent]:
        future: asyncio.Future[WatchEvent] = asyncio.get_running_loop().create_future()
        table.setdefault(path, []).append((session, future))
        return future

    def _fire(
        self,
        table: dict[str, list[tuple[Session, asyncio.Future[WatchEvent]]]],
        path: str,
        event: WatchEvent,
    ) -> None:
        for _session, future in table.pop(path, []):
            if not future.done():
                future.set_result(event)

    def add_recursive(self, session: Session, path: str, listener: Listener) -> None:
        self._recursive.append((session, path, listener))

    def _fire_recursive(self, path: str, event: WatchEvent) -> None:
        """Persistent: the watch stays after firing. A session's listener is called once per
        event even if two of its watches cover the path (the server keeps one per path)."""
        called: list[tuple[Session, Listener]] = []
        for session, root, listener in list(self._recursive):
            below = root == "/" or path == root or path.startswith(root + "/")
            if below and (session, listener) not in called:
                called.append((session, listener))
                listener(event, path)

    def new_session_id(self) -> int:
        self.next_session += 1
        return self.next_session

    def expire(self, session_id: int) -> None:
        """The session expired: its ephemeral znodes are deleted (their watches fire)."""
        for path in [p for p, n in self.nodes.items() if n.ephemeral_owner == session_id]:
            self.delete(path, version=ANY_VERSION, by="session-expiry")

    def drop_watches(self, session: Session) -> None:
        """The session lost its connection or expired: every watch of it fires with loss."""
        self._recursive = [w for w in self._recursive if w[0] is not session]
        for table in (self._data_watches, self._child_watches):
            for path in list(table):
                keep = []
                for owner, future in table[path]:
                    if owner is session:
                        if not future.done():
                            future.set_result(WatchEvent.CONNECTION_LOST)
                    else:
                        keep.append((owner, future))
                if keep:
                    table[path] = keep
                else:
                    del table[path]


class Session:
    """One service's client session: a `MetadataStore` with faults at every request."""

    def __init__(self, server: ZooKeeper, name: str) -> None:
        self._server = server
        self._sched = server.sched
        self.name = name
        self.closed = False
        self.session_id: int | None = server.new_session_id()
        self._lost: list[asyncio.Future[None]] = []

    @property
    def last_zxid(self) -> int | None:
        return self._server.zxid

    @property
    def connected(self) -> bool:
        """Reconnected at once after a loss (the loss itself is what callers see)."""
        return not self.closed

    async def wait_connected(self) -> None:
        if self.closed:
            await asyncio.get_running_loop().create_future()  # a dead process waits forever

    def connection_lost(self) -> asyncio.Future[None]:
        """Done at the next connection loss (or expiry, or the process's death)."""
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lost.append(lost)
        return lost

    def _signal_lost(self) -> None:
        lost, self._lost = self._lost, []
        for future in lost:
            if not future.done():
                future.set_result(None)

    def close(self) -> None:
        """The process died: its watches go with it (never fired into a dead process); its
        session, and with it its ephemeral znodes, expires `SESSION_TIMEOUT` later."""
        if self.closed:
            return
        self.closed = True
        self._server._recursive = [w for w in self._server._recursive if w[0] is not self]
        self._lost = []
        if self.session_id is not None and any(
            n.ephemeral_owner == self.session_id for n in self._server.nodes.values()
        ):
            asyncio.get_running_loop().call_later(
                SESSION_TIMEOUT, self._server.expire, self.session_id
            )
        for table in (self._server._data_watches, self._server._child_watches):
            for path in list(table):
                table[path] = [(s, f) for s, f in table[path] if s is not self]
                if not table[path]:
                    del table[path]

    async def _request(self, what: str, path: str, apply: Callable[[], _T]) -> _T:
        self._server.on_request(path, self.name)
        fault = await self._sched.io(f"zk[{self.name}] {what} {path}")
        if self.closed:
            raise StoreUnavailable(path, "session closed")
        if fault is Fault.BEFORE or fault is Fault.ERROR:
            self._lose()
            raise StoreUnavailable(path, "connection loss")
        result = apply()
        if fault is Fault.AFTER:
            self._lose()
            await self._sched.delay()
            raise StoreUnavailable(path, "connection loss after the request was sent")
        return result

    def _lose(self) -> None:
        # A disconnect or an expired session: both lose every watch; an expiry also deletes
        # the session's ephemeral znodes and the client continues on a new session.
        self._server.drop_watches(self)
        self._signal_lost()
        if self._sched.chance(EXPIRY_SHARE):
            old, self.session_id = self.session_id, self._server.new_session_id()
            self._sched.log(f"zk[{self.name}] session expired")
            if old is not None:
                self._server.expire(old)

    async def add_recursive_watch(self, path: str, listener: Listener) -> None:
        """`addWatch` PERSISTENT_RECURSIVE on `path` (see the module's docstring)."""
        await self._request(
            "addWatch", path, lambda: self._server.add_recursive(self, path, listener)
        )

    async def get(self, path: str) -> Versioned:
        return await self._request("get", path, lambda: self._server.versioned(path))

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        def read() -> list[Versioned | MetadataError | None]:
            out: list[Versioned | MetadataError | None] = []
            for path in paths:
                try:
                    out.append(self._server.versioned(path))
                except NoNode:
                    out.append(None)
            return out

        for path in paths[1:]:  # `_request` reports the first
            self._server.on_request(path, self.name)
        try:
            return await self._request("multiRead", paths[0] if paths else "/", read)
        except StoreUnavailable as e:
            return [StoreUnavailable(path, e.reason) for path in paths]

    async def get_and_watch(self, path: str) -> tuple[Versioned, asyncio.Future[WatchEvent]]:
        def read() -> tuple[Versioned, asyncio.Future[WatchEvent]]:
            node = self._server.versioned(path)  # no watch is left on an absent znode
            return node, self._server.watch_data(self, path)

        return await self._request("get+watch", path, read)

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        def read() -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
            return self._server.stat(path), self._server.watch_data(self, path)

        return await self._request("exists+watch", path, read)

    async def get_children(self, path: str) -> list[str]:
        def read() -> list[str]:
            node = self._server.nodes.get(path)
            if node is None:
                raise NoNode(path)
            return list(node.children)

        return await self._request("children", path, read)

    async def get_children_and_watch(
        self, path: str
    ) -> tuple[list[str], asyncio.Future[WatchEvent]]:
        def read() -> tuple[list[str], asyncio.Future[WatchEvent]]:
            node = self._server.nodes.get(path)
            if node is None:
                raise NoNode(path)
            return list(node.children), self._server.watch_children(self, path)

        return await self._request("children+watch", path, read)

    async def exists(self, path: str) -> Stat | None:
        return await self._request("exists", path, lambda: self._server.stat(path))

    async def sync(self, path: str) -> None:
        # One in-memory server: a session's view is always current; only faults remain.
        await self._request("sync", path, lambda: None)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Stat:
        def apply() -> Stat:
            owner = (self.session_id or 0) if ephemeral else 0
            return self._server.create(path, data, make_parents=make_parents, ephemeral_owner=owner)

        return await self._request("create", path, apply)

    async def create_sequential(
        self,
        prefix: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        ephemeral: bool = False,
    ) -> tuple[str, Stat]:
        def apply() -> tuple[str, Stat]:
            owner = (self.session_id or 0) if ephemeral else 0
            path = self._server.create_sequential(
                prefix, data, make_parents=make_parents, ephemeral_owner=owner
            )
            stat = self._server.stat(path)
            assert stat is not None
            return path, stat

        return await self._request("create-seq", prefix, apply)

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        return await self._request(
            f"set@{version}", path, lambda: self._server.set(path, data, version=version)
        )

    async def delete(self, path: str, *, version: int) -> None:
        await self._request(
            f"delete@{version}",
            path,
            lambda: self._server.delete(path, version=version, by=self.name),
        )

    async def delete_many(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        """As the ZooKeeper adapter: multis of the undecided deletes until each is decided."""
        for path, _ in items[1:]:  # `_request` reports the first
            self._server.on_request(path, self.name)
        decided: dict[int, MetadataError | None] = {}
        undecided = list(range(len(items)))
        while undecided:
            batch = [items[i] for i in undecided]
            try:
                failed = await self._request(
                    "multi-delete",
                    batch[0][0],
                    functools.partial(self._server.multi_delete, batch, self.name),
                )
            except StoreUnavailable as e:
                decided.update({i: StoreUnavailable(items[i][0], e.reason) for i in undecided})
                break
            if failed is None:
                decided.update(dict.fromkeys(undecided))
                break
            position, error = failed
            index = undecided[position]
            decided[index] = error
            undecided.remove(index)
        return [decided[i] for i in range(len(items))]
