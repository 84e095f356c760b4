"""How `zk_store` uses an aiozk session (part of the ZooKeeper adapter): which failures mean
"no answer", the retry policy (reads resent, writes never), prompt notice of a closed
connection, and watches as futures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import aiozk
from aiozk import exc as zk_exc
from aiozk import protocol as zk_protocol
from aiozk.states import States

from services.metadata.store import WatchEvent

UNAVAILABLE = (
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
DATA_EVENTS = {
    zk_protocol.WatchEvent.DATA_CHANGED: WatchEvent.CHANGED,
    zk_protocol.WatchEvent.DELETED: WatchEvent.DELETED,
}
EXISTS_EVENTS = {**DATA_EVENTS, zk_protocol.WatchEvent.CREATED: WatchEvent.CREATED}
CHILD_EVENTS = {
    zk_protocol.WatchEvent.CHILDREN_CHANGED: WatchEvent.CHANGED,
    zk_protocol.WatchEvent.DELETED: WatchEvent.DELETED,
}


class NoWriteResend(aiozk.RetryPolicy):  # type: ignore[misc]
    """Retry reads after a connection loss; fail writes at once (their outcome is unknown)."""

    def __init__(self) -> None:
        super().__init__(try_limit=None, sleep_func=lambda _timings: 0.05)

    async def enforce(self, request: Any = None) -> None:
        if getattr(request, "writes_data", False) and self.timings.get(id(request)):
            self.clear(request)
            raise zk_exc.FailedRetry
        await super().enforce(request)


class ConnectionGuard:
    """Fails in-flight requests as soon as the server closes the socket.

    aiozk's read loop ends silently when the socket closes; the loss would only be noticed
    by the next heartbeat. Aborting the connection fails pending requests with ConnectError,
    which moves the session to SUSPENDED and starts its repair.
    """

    def __init__(self, session: Any) -> None:
        self._session = session
        self._hooked: object = None

    def hook(self) -> None:
        """Watch the session's current connection (once per connection)."""
        conn = self._session.conn
        if conn is None or conn is self._hooked or conn.read_loop_task is None:
            return
        self._hooked = conn
        conn.read_loop_task.add_done_callback(lambda _task: self.drop(conn))

    def drop(self, conn: Any) -> None:
        """Fail `conn`'s pending requests; if the session still uses it, start the repair (a
        connection already replaced must not suspend its successor)."""
        if conn.closing:
            return
        conn.abort()
        if self._session.conn is conn and self._session.state == States.CONNECTED:
            self._session.state.transition_to(States.SUSPENDED)


def register_watch(
    session: Any, full: str, events: dict[int, WatchEvent]
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
        session.add_watch_callback(zk_type, full, callback)
        callbacks.append((zk_type, callback))
    lost = session.state.wait_for(States.SUSPENDED, States.LOST)
    lost.add_done_callback(lambda _f: fire(WatchEvent.CONNECTION_LOST))

    def unregister() -> None:
        for zk_type, callback in callbacks:
            if callback in session.watch_callbacks.get((zk_type, full), ()):
                session.remove_watch_callback(zk_type, full, callback)
        for state in (States.SUSPENDED, States.LOST):
            session.state.futures[state].discard(lost)
        lost.cancel()

    fired.add_done_callback(lambda _f: unregister())
    return fired, unregister


def _bind(fire: Callable[[WatchEvent], None], event: WatchEvent) -> Callable[[str], None]:
    return lambda _path: fire(event)


RECURSIVE_EVENTS = {
    zk_protocol.WatchEvent.CREATED: WatchEvent.CREATED,
    zk_protocol.WatchEvent.DATA_CHANGED: WatchEvent.CHANGED,
    zk_protocol.WatchEvent.DELETED: WatchEvent.DELETED,
}


class EventTap:
    """Delivers the events of persistent recursive watches (`addWatch`) to listeners.

    aiozk's connection hands every xid -1 message to `session.event_dispatch`, which calls
    the callbacks registered for exactly (type, path) and, being a defaultdict lookup, adds
    an empty entry for every path it has no callback for; aiozk would then re-register each
    such path as a one-shot watch after a reconnect. The tap sits in front of it: events for
    paths with a one-shot callback (and state events) still reach aiozk; every event below a
    recursive watch's path also goes to that watch's listener, with the chroot removed.
    """

    def __init__(self, session: Any, chroot: str) -> None:
        self._session = session
        self._original = session.event_dispatch
        self._chroot = chroot.rstrip("/")
        self._listeners: dict[str, Callable[[WatchEvent, str], None]] = {}
        # New connections take `session.event_dispatch` when they are made; the current one
        # already holds the original.
        session.event_dispatch = self.dispatch
        if session.conn is not None:
            session.conn.watch_handler = self.dispatch

    def listen(self, full: str, listener: Callable[[WatchEvent, str], None]) -> None:
        """Call `listener(kind, path)` for every event at or below `full` (a server path)."""
        self._listeners[full] = listener

    def dispatch(self, event: Any) -> None:
        if not event.type:
            self._original(event)
            return
        if (event.type, event.path) in self._session.watch_callbacks:
            self._original(event)
        kind = RECURSIVE_EVENTS.get(event.type)
        if kind is None:
            return
        path: str = event.path
        for full, listener in self._listeners.items():
            if path == full or path.startswith(full.rstrip("/") + "/"):
                listener(kind, path[len(self._chroot) :] or "/")
