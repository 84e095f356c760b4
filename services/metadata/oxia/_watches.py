"""Watches on the event loop, fired from the notification streams' changes.

A watch is registered before the read it guards and only while every shard's stream is up,
so any change after the read is notified after registration. A change made before the read
but notified after it may fire a watch needlessly; the port allows that ("what was read
before may be stale"), and data watches skip changes whose version id is not above the one
read. Whenever a stream breaks, every open watch fires `CONNECTION_LOST`, as the ZooKeeper
adapter's do when its connection is lost.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from services.metadata.oxia._notifications import Change
from services.metadata.store import WatchEvent

# Oxia's notification types (`NotificationType` in the client's proto).
KEY_CREATED = 0
KEY_MODIFIED = 1
KEY_DELETED = 2
KEY_RANGE_DELETED = 3

_EVENT = {KEY_CREATED: WatchEvent.CREATED, KEY_MODIFIED: WatchEvent.CHANGED}


def parent_of(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class Watches:
    """Open data, child and recursive watches, and the `connection_lost()` futures."""

    def __init__(self) -> None:
        self._data: dict[str, dict[asyncio.Future[WatchEvent], _DataWatch]] = defaultdict(dict)
        self._children: dict[str, set[asyncio.Future[WatchEvent]]] = defaultdict(set)
        self._recursive: list[tuple[str, Callable[[WatchEvent, str], None]]] = []
        self._lost: set[asyncio.Future[None]] = set()

    def data(self, path: str) -> asyncio.Future[WatchEvent]:
        """A future for changes of `path` (see `seen`)."""
        fired: asyncio.Future[WatchEvent] = asyncio.get_running_loop().create_future()
        self._data[path][fired] = _DataWatch()
        fired.add_done_callback(lambda f: self._forget(self._data, path, f))
        return fired

    def seen(self, path: str, fired: asyncio.Future[WatchEvent], version: int) -> None:
        """The read guarded by `fired` saw `version` (-1: no record): creates and changes up
        to it are older than the read. Changes notified while the read was in flight are
        judged now."""
        watch = self._data.get(path, {}).get(fired)
        if watch is None:
            return
        watch.seen = version
        for event, changed in watch.pending:
            if watch.fires(event, changed):
                _fire(fired, event)
                return
        watch.pending.clear()

    def children(self, path: str) -> asyncio.Future[WatchEvent]:
        fired: asyncio.Future[WatchEvent] = asyncio.get_running_loop().create_future()
        self._children[path].add(fired)
        fired.add_done_callback(lambda f: self._forget(self._children, path, f))
        return fired

    def recursive(self, path: str, listener: Callable[[WatchEvent, str], None]) -> None:
        self._recursive.append((path, listener))

    def lost(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._lost.add(future)
        future.add_done_callback(self._lost.discard)
        return future

    def dispatch(self, changes: list[Change]) -> None:
        for key, kind, version, _range_end in changes:
            if kind == KEY_RANGE_DELETED:
                # The deleted keys are not named: every watch may have missed its change.
                self.lose()
                return
            self._key_changed(key, kind, version)

    def lose(self) -> None:
        """Fire every open watch with CONNECTION_LOST and every `lost()` future; end the
        recursive watches."""
        for futures in list(self._data.values()):
            for fired in list(futures):
                _fire(fired, WatchEvent.CONNECTION_LOST)
        for children in list(self._children.values()):
            for fired in list(children):
                _fire(fired, WatchEvent.CONNECTION_LOST)
        # Recursive watches end silently, as the port says: their owners learn of the loss
        # from `connection_lost()`.
        self._recursive = []
        for future in list(self._lost):
            if not future.done():
                future.set_result(None)

    def _key_changed(self, key: str, kind: int, version: int) -> None:
        event = _EVENT.get(kind, WatchEvent.DELETED)
        for fired, watch in list(self._data.get(key, {}).items()):
            if watch.seen is None:
                watch.pending.append((event, version))
            elif watch.fires(event, version):
                _fire(fired, event)
        if event is WatchEvent.DELETED:
            for fired in list(self._children.get(key, ())):
                _fire(fired, WatchEvent.DELETED)
        if event is not WatchEvent.CHANGED:
            for fired in list(self._children.get(parent_of(key), ())):
                _fire(fired, WatchEvent.CHANGED)
        for path, listener in list(self._recursive):
            if key == path or key.startswith(path.rstrip("/") + "/"):
                listener(event, key)

    @staticmethod
    def _forget(
        table: dict[str, dict[asyncio.Future[WatchEvent], _DataWatch]]
        | dict[str, set[asyncio.Future[WatchEvent]]],
        path: str,
        fired: asyncio.Future[WatchEvent],
    ) -> None:
        entries = table.get(path)
        if entries is None:
            return
        if isinstance(entries, dict):
            entries.pop(fired, None)
        else:
            entries.discard(fired)
        if not entries:
            del table[path]


@dataclass
class _DataWatch:
    seen: int | None = None
    """The version the guarded read saw; None while it is in flight."""
    pending: list[tuple[WatchEvent, int]] = field(default_factory=list)
    """Changes notified while the read was in flight."""

    def fires(self, event: WatchEvent, version: int) -> bool:
        # A delete carries no version: it may be older than the read, but is never skipped.
        return event is WatchEvent.DELETED or version > (self.seen if self.seen is not None else -1)


def _fire(fired: asyncio.Future[WatchEvent], event: WatchEvent) -> None:
    if not fired.done():
        fired.set_result(event)
