"""`ZnodeStore` on top of the metadata layer's `MetadataStore` (the aiozk adapter lives there).

Only translation happens here: `NoNode` becomes `None`, a watch future becomes a callback, and
a watch that fired because the connection or session was lost bumps the epoch, so that every
cache drops what it read before. A store that did not answer raises `ZooKeeperUnavailable`,
which names its dependency: the decision then tells the deleter that ZooKeeper is out.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence

from services.metadata.errors import NoNode, StoreUnavailable
from services.metadata.store import ANY_VERSION, MetadataStore, Versioned, WatchEvent
from services.verifier.ports import WatchCallback, Znode


class ZooKeeperUnavailable(StoreUnavailable):
    """ZooKeeper did not answer (timeout, connection loss, session expiry): an outage."""

    dependency = "zookeeper"


def _tagged(error: StoreUnavailable) -> ZooKeeperUnavailable:
    if isinstance(error, ZooKeeperUnavailable):
        return error
    tagged = ZooKeeperUnavailable(error.path, error.reason)
    tagged.__cause__ = error
    return tagged


@contextlib.contextmanager
def _outage() -> Iterator[None]:
    try:
        yield
    except StoreUnavailable as e:
        raise _tagged(e) from e


class MetadataZnodeStore:
    """The verifier's reads and writes on one metadata-store session."""

    def __init__(
        self, store: MetadataStore, *, sync_after_reads: MetadataStore | None = None
    ) -> None:
        """`sync_after_reads`: another session whose reads must come after this store's in
        time (BookKeeper's store apart from Pulsar's: the owner a verdict uses must be at
        least as new as its ledger read, which one session gives by itself). Each read here
        returns only once that session was synced after it; a failed sync fails the read."""
        self._store = store
        self._then_sync = sync_after_reads
        self._epoch = 0
        self._watches: dict[tuple[str, WatchCallback], asyncio.Future[WatchEvent]] = {}

    def epoch(self) -> int:
        return self._epoch

    async def read(self, path: str, *, watch: WatchCallback | None = None) -> Znode | None:
        try:
            with _outage():
                if watch is None:
                    node = await self._store.get(path)
                else:
                    node, fired = await self._store.get_and_watch(path)
                    self._arm(path, watch, fired)
        except NoNode:
            await self._synced()
            return None
        await self._synced()
        return Znode(node.data, node.version, node.ctime_ms, node.cversion, node.mtime_ms)

    async def _synced(self) -> None:
        if self._then_sync is not None:
            with _outage():
                await self._then_sync.sync("/")

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        """One `get_many` (multiRead) for all paths; absence and errors stay per path."""
        with _outage():
            results = await self._store.get_many(paths)
        if paths:
            await self._synced()
        return [
            Znode(got.data, got.version, got.ctime_ms, got.cversion, got.mtime_ms)
            if isinstance(got, Versioned)
            else _tagged(got)
            if isinstance(got, StoreUnavailable)
            else got
            for got in results
        ]

    def _arm(self, path: str, watch: WatchCallback, fired: asyncio.Future[WatchEvent]) -> None:
        key = (path, watch)
        previous = self._watches.pop(key, None)
        if previous is not None:
            previous.cancel()
        self._watches[key] = fired

        def on_fired(future: asyncio.Future[WatchEvent]) -> None:
            if self._watches.get(key) is future:
                del self._watches[key]
            if future.cancelled():
                return
            if future.result() is WatchEvent.CONNECTION_LOST:
                self._epoch += 1
            watch(path)

        fired.add_done_callback(on_fired)

    def unwatch(self, path: str, watch: WatchCallback) -> None:
        fired = self._watches.pop((path, watch), None)
        if fired is not None:
            fired.cancel()

    async def watch_node(self, path: str, watch: WatchCallback) -> bool:
        """Watch `path` itself (create, data change, delete); True when it exists."""
        with _outage():
            stat, fired = await self._store.watch(path)
        self._arm(path, watch, fired)
        return stat is not None

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str] | None:
        try:
            with _outage():
                if watch is None:
                    return await self._store.get_children(path)
                names, fired = await self._store.get_children_and_watch(path)
        except NoNode:
            return None
        self._arm(path, watch, fired)
        return names

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        with _outage():
            path, _stat = await self._store.create_sequential(prefix, data, make_parents=True)
        return path

    async def create(self, path: str, data: bytes) -> str:
        with _outage():
            await self._store.create(path, data, make_parents=True)
        return path

    async def delete(self, path: str) -> None:
        with _outage(), contextlib.suppress(NoNode):
            await self._store.delete(path, version=ANY_VERSION)

    async def delete_all(self, paths: Sequence[str]) -> None:
        with _outage():
            outcomes = await self._store.delete_many([(path, ANY_VERSION) for path in paths])
        for outcome in outcomes:
            if outcome is not None and not isinstance(outcome, NoNode):
                raise outcome
