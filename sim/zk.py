"""In-memory ZooKeeper: one server state, one session per service, behind `MetadataStore`.

Modelled as ZooKeeper behaves (and as `services.metadata.zk_store` relies on):
- every write bumps the zxid; `set` and `delete` compare the version (CAS); `-1` is any;
- a delete of a znode with children fails (`NotEmpty`); `multi` is all or nothing and
  reports the first failing op (the adapter retries the undecided ones, as here);
- one-shot watches fire on the server at the write, so a session sees the event before the
  answer to any later read; a lost connection or an expired session fires every watch of the
  session with `CONNECTION_LOST`;
- a lost connection leaves a write's outcome unknown: `Fault.AFTER` applies it, then raises.
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


@dataclass
class _Node:
    data: bytes
    version: int
    ctime_ms: int
    mtime_ms: int
    czxid: int
    mzxid: int
    cversion: int = 0
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
        self.on_write: Callable[[str, bytes | None], None] = lambda path, data: None
        """Called after every create, set and delete (data None) with the path."""
        self.on_delete: Callable[[str, str], None] = lambda path, by: None
        """Called before a znode is deleted, with who deletes it."""

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
            0,
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

    def create(self, path: str, data: bytes = b"", *, make_parents: bool = False) -> Stat:
        if path in self.nodes:
            raise NodeExists(path)
        parent = _parent(path)
        if parent not in self.nodes:
            if not make_parents:
                raise NoNode(parent)
            self.create(parent, b"", make_parents=True)
        self.zxid += 1
        now = self.sched.now_ms()
        self.nodes[path] = _Node(data, 0, now, now, self.zxid, self.zxid)
        p = self.nodes[parent]
        p.children[path.rsplit("/", 1)[1]] = None
        p.cversion += 1
        self._fire(self._data_watches, path, WatchEvent.CREATED)
        self._fire(self._child_watches, parent, WatchEvent.CHANGED)
        self.on_write(path, data)
        stat = self.stat(path)
        assert stat is not None
        return stat

    def create_sequential(self, prefix: str, data: bytes, *, make_parents: bool) -> str:
        parent = _parent(prefix)
        if parent not in self.nodes:
            if not make_parents:
                raise NoNode(parent)
            self.create(parent, b"", make_parents=True)
        path = f"{prefix}{self.nodes[parent].cversion:010d}"
        self.create(path, data)
        return path

    def set(self, path: str, data: bytes, *, version: int) -> int:
        node = self.nodes.get(path)
        if node is None:
            raise NoNode(path)
        if version != ANY_VERSION and node.version != version:
            raise VersionConflict(path, version)
        self.zxid += 1
        node.data, node.version = data, node.version + 1
        node.mtime_ms, node.mzxid = self.sched.now_ms(), self.zxid
        self._fire(self._data_watches, path, WatchEvent.CHANGED)
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

    def drop_watches(self, session: Session) -> None:
        """The session lost its connection or expired: every watch of it fires with loss."""
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

    @property
    def last_zxid(self) -> int | None:
        return self._server.zxid

    def close(self) -> None:
        """The process died: its watches go with it (never fired into a dead process)."""
        self.closed = True
        for table in (self._server._data_watches, self._server._child_watches):
            for path in list(table):
                table[path] = [(s, f) for s, f in table[path] if s is not self]
                if not table[path]:
                    del table[path]

    async def _request(self, what: str, path: str, apply: Callable[[], _T]) -> _T:
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
        # A disconnect or an expired session: both lose every watch (no ephemerals here).
        self._server.drop_watches(self)

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

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
    ) -> Stat:
        return await self._request(
            "create", path, lambda: self._server.create(path, data, make_parents=make_parents)
        )

    async def create_sequential(
        self, prefix: str, data: bytes = b"", *, make_parents: bool = False
    ) -> tuple[str, Stat]:
        def apply() -> tuple[str, Stat]:
            path = self._server.create_sequential(prefix, data, make_parents=make_parents)
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
