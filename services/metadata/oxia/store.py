"""The Oxia adapter of the `MetadataStore` port, modelled on Pulsar's `OxiaMetadataStore`
(pulsar-metadata, `org.apache.pulsar.metadata.impl.oxia`).

Paths are Oxia keys as they are (flat keys, the same strings as ZooKeeper paths); parents
are records with empty values, created first by a create with `make_parents`. The children of
`p` are `list(p + "/", p + "//")`: in Oxia's hierarchical key order that range holds the keys
one level below `p` and no deeper.

Versions: a record's `version` (and `mzxid`) is Oxia's version id, what a compare-and-set
names (`expected_version_id`) and what Pulsar's `convertStat` reports as `Stat.version`.
Version ids come from a counter shared by the whole shard: they strictly increase across the
writes of one key, but not by one, and unrelated keys share the sequence. Callers that compare
versions (the fence token's "current version ≥ token") may rely on "strictly increasing per
key" and on nothing else. A create is a put expecting version -1 (`NodeExists` when the key
is there).

Stat fields Oxia does not have: `czxid` is the record's creation time in ms (kept across
puts, new when the key is deleted and created again), so "same incarnation" compares the
creation time: two incarnations created within the same millisecond look the same. `ctime_ms`
and `mtime_ms` are Oxia's timestamps. `cversion` is the record's modifications count, which
sequential creates advance (below). `ephemeral_owner` is 0 for a persistent record; for an
ephemeral one it is `session_id` when the record belongs to this store's live session on its
shard, else Oxia's session id plus one (ids start at 0). `data_length` is the value's length
and `num_children` is counted with a list of the children (one request per shard): both
computed. `last_zxid` is None (Oxia has no global transaction id).

Sessions are per shard in Oxia (the client opens one on a shard at its first ephemeral put
there). This store's `session_id` is its own number, replaced whenever one of those sessions
ends: ephemeral records made before may be gone, and every watch fires `CONNECTION_LOST`.

Every call runs on the synchronous client in a bounded thread pool and is bounded by the
request timeout; an unanswered call is `StoreUnavailable` (a write's outcome is then unknown)
and writes are never resent. `NoNode` only when the server said the key is absent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from oxia.client import EXPECTED_RECORD_DOES_NOT_EXIST

from services.metadata.errors import (
    MetadataError,
    NodeExists,
    NoNode,
    NotEmpty,
    StoreUnavailable,
    VersionConflict,
)
from services.metadata.oxia import _client
from services.metadata.oxia._calls import Caller, Conflict
from services.metadata.oxia._children import children_range
from services.metadata.oxia._deletes import ManyDeletes
from services.metadata.oxia._notifications import ShardStreams
from services.metadata.oxia._watches import Watches, parent_of
from services.metadata.oxia.limits import (
    DEFAULT_MAX_THREADS,
    MAX_SESSION_TIMEOUT,
    MIN_SESSION_TIMEOUT,
)
from services.metadata.store import ANY_VERSION, MetadataStore, Stat, Versioned, WatchEvent

SEQUENTIAL_ATTEMPTS = 64
"""Rounds a sequential create may lose to concurrent ones before it gives up."""


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A shared read's failure is its callers'; none left (all cancelled) is not an error."""
    if not task.cancelled():
        task.exception()


def _check_path(path: str) -> None:
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise MetadataError(path, "not an absolute znode path")


class OxiaMetadataStore:
    """`MetadataStore` on an Oxia namespace. Create with `OxiaMetadataStore.connect(...)`."""

    def __init__(self, *, request_timeout: float, max_threads: int) -> None:
        self._request_timeout = request_timeout
        self._calls = Caller(request_timeout=request_timeout, max_threads=max_threads)
        self._call = self._calls.call
        self._queued_gets: dict[str, asyncio.Future[Versioned]] = {}
        """Per key, the get waiting for a thread that a new get of the key joins."""
        self._loop = asyncio.get_running_loop()
        self._client: Any = None
        self._many: ManyDeletes | None = None
        self._streams: ShardStreams | None = None
        self._watches = Watches()
        self._up: set[int] = set()
        self._all_up = asyncio.Event()
        self._session_id = self._new_session_id()
        self._closed = False

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls,
        address: str,
        *,
        namespace: str = "default",
        session_timeout: float,
        request_timeout: float,
        max_threads: int = DEFAULT_MAX_THREADS,
    ) -> AsyncIterator[OxiaMetadataStore]:
        """Open a client on `address` (`host:port` of the Oxia service) for `namespace`;
        close it on exit. `StoreUnavailable` when no shard assignments and notification
        streams come within `request_timeout`. `session_timeout` bounds how long ephemeral
        records outlive a silent client (Oxia accepts 2 s to 5 min: else ValueError)."""
        if not MIN_SESSION_TIMEOUT <= session_timeout <= MAX_SESSION_TIMEOUT:
            raise ValueError(
                f"Oxia accepts session timeouts from {MIN_SESSION_TIMEOUT:g} s to "
                f"{MAX_SESSION_TIMEOUT:g} s, not {session_timeout:g} s"
            )
        store = cls(request_timeout=request_timeout, max_threads=max_threads)
        try:
            await store._open(address, namespace, round(session_timeout * 1000))
            yield store
        finally:
            await store.close()

    async def _open(self, address: str, namespace: str, session_timeout_ms: int) -> None:
        opening = functools.partial(
            _client.open_client,
            address,
            namespace,
            session_timeout_ms,
            self._request_timeout,
            self._session_closed,
        )
        try:
            self._client = await self._loop.run_in_executor(self._calls.pool, opening)
        except Exception as e:
            raise StoreUnavailable("/", f"cannot reach Oxia at {address}: {e}") from e
        self._many = ManyDeletes(
            self._client, self._calls, check_path=_check_path, refine=self._refine
        )
        self._streams = ShardStreams(
            self._client,
            self._loop,
            on_up=self._stream_up,
            on_batch=self._watches.dispatch,
            on_down=self._stream_down,
        )
        self._streams.start()
        await self._streams_ready("/")

    async def close(self) -> None:
        """Close the client (its sessions too: their ephemeral records go); bounded."""
        if self._closed:
            return
        self._closed = True
        self._all_up.clear()
        self._watches.lose()
        client, streams = self._client, self._streams
        closing = functools.partial(self._close_client, client, streams)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                self._loop.run_in_executor(None, closing), 2 * self._request_timeout
            )
        self._calls.shutdown()

    def _close_client(self, client: Any, streams: ShardStreams | None) -> None:
        if client is not None:
            client.close()
        if streams is not None:
            streams.close(self._request_timeout)

    # -- session and connection --------------------------------------------------------

    @staticmethod
    def _new_session_id() -> int:
        # Above any session id an Oxia shard gives (its log offsets), so never taken for one.
        return (1 << 62) | secrets.randbits(62)

    @property
    def last_zxid(self) -> int | None:
        return None

    @property
    def connected(self) -> bool:
        return not self._closed and self._all_up.is_set()

    @property
    def session_id(self) -> int | None:
        return self._session_id

    async def wait_connected(self) -> None:
        await self._all_up.wait()

    def connection_lost(self) -> asyncio.Future[None]:
        return self._watches.lost()

    def _stream_up(self, shard: int) -> None:
        self._up.add(shard)
        if self._streams is not None and self._up.issuperset(self._streams.shard_ids):
            self._all_up.set()

    def _stream_down(self, shard: int, _reason: str) -> None:
        self._up.discard(shard)
        self._all_up.clear()
        self._watches.lose()

    def _session_closed(self, _session: Any) -> None:
        """From a client thread: one of our per-shard sessions ended."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._session_lost)

    def _session_lost(self) -> None:
        if self._closed:
            return
        self._session_id = self._new_session_id()
        self._watches.lose()

    async def _streams_ready(self, path: str) -> None:
        """Watches may be set only while every shard's stream is up."""
        if self._closed:
            raise StoreUnavailable(path, "the store is closed")
        try:
            await asyncio.wait_for(self._all_up.wait(), self._request_timeout)
        except TimeoutError:
            raise StoreUnavailable(path, "notification streams are down") from None

    def _owner(self, key: str, version: Any) -> int:
        return _client.owner(self._client, key, version, ours=self._session_id)

    # -- reads -------------------------------------------------------------------------

    async def get(self, path: str) -> Versioned:
        """Gets of one key that wait together for a thread share one client call, handed to
        a thread only after all of them asked: each gets a read it could have made itself,
        none older than its own request. (The verifier's decisions of a batch read their
        namespace's policies together: one call a namespace, not one a decision.)"""
        _check_path(path)
        queued = self._queued_gets.get(path)
        if queued is None:
            queued = asyncio.ensure_future(self._read(path))
            queued.add_done_callback(_retrieved)
            self._queued_gets[path] = queued
        return await asyncio.shield(queued)

    async def _read(self, path: str) -> Versioned:
        me = asyncio.current_task()

        def sent() -> None:  # later gets of the key wait for a call of their own
            if self._queued_gets.get(path) is me:
                del self._queued_gets[path]

        try:
            _key, value, version = await self._call(path, self._client.get, path, on_start=sent)
        finally:
            sent()
        return _client.to_versioned(version, value)

    async def sync(self, path: str) -> None:
        # Oxia serves every read from the shard's leader: a read after this call already sees
        # what was committed before it. What can be checked is that the notification streams
        # are up (a watch set now would miss nothing); their delivery is not ordered with
        # read replies.
        _check_path(path)
        await self._streams_ready(path)

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        """One get per path, concurrently through the pool (the client has no multi-get)."""
        return list(await asyncio.gather(*(self._get_or_error(path) for path in paths)))

    async def _get_or_error(self, path: str) -> Versioned | MetadataError | None:
        try:
            return await self.get(path)
        except NoNode:
            return None
        except MetadataError as e:
            return e

    async def get_and_watch(self, path: str) -> tuple[Versioned, asyncio.Future[WatchEvent]]:
        _check_path(path)
        await self._streams_ready(path)
        fired = self._watches.data(path)
        try:
            versioned = await self.get(path)
        except BaseException:
            fired.cancel()
            raise
        self._watches.seen(path, fired, versioned.version)
        return versioned, fired

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        _check_path(path)
        await self._streams_ready(path)
        fired = self._watches.data(path)
        try:
            stat = await self.exists(path)
        except BaseException:
            fired.cancel()
            raise
        self._watches.seen(path, fired, stat.version if stat is not None else -1)
        return stat, fired

    async def exists(self, path: str) -> Stat | None:
        _check_path(path)
        try:
            _key, value, version = await self._call(path, self._client.get, path)
        except NoNode:
            return None
        children = await self._list_children(path)
        return _client.to_stat(
            version, value or b"", num_children=len(children), owner=self._owner(path, version)
        )

    async def get_children(self, path: str) -> list[str]:
        _check_path(path)
        names, _present = await asyncio.gather(self._list_children(path), self._must_exist(path))
        return names

    async def get_children_and_watch(
        self, path: str
    ) -> tuple[list[str], asyncio.Future[WatchEvent]]:
        _check_path(path)
        await self._streams_ready(path)
        fired = self._watches.children(path)
        try:
            names = await self.get_children(path)
        except BaseException:
            fired.cancel()
            raise
        return names, fired

    async def add_recursive_watch(
        self, path: str, listener: Callable[[WatchEvent, str], None]
    ) -> None:
        """From the notification streams: every create, change and delete at or below `path`
        until a stream breaks or a session ends (then `connection_lost()` futures are done
        and this watch ends: call again once connected)."""
        _check_path(path)
        await self._streams_ready(path)
        self._watches.recursive(path, listener)

    async def _list_children(self, path: str) -> list[str]:
        start, end = children_range(path)
        keys = await self._call(path, self._client.list, start, end)
        return [key[len(start) :] for key in keys]

    async def _must_exist(self, path: str) -> None:
        if path != "/":
            await self._call(path, self._client.get, path, include_value=False)

    # -- writes ------------------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Stat:
        """`container_parents` is ignored: Oxia has no containers (parents stay)."""
        _check_path(path)
        try:
            await self._must_exist(parent_of(path))
        except NoNode:
            if not make_parents:
                raise
            await self._create_parents(path)
        return await self._put_new(path, data, ephemeral=ephemeral)

    async def _put_new(self, path: str, data: bytes, *, ephemeral: bool = False) -> Stat:
        put = functools.partial(
            self._client.put,
            path,
            data,
            expected_version_id=EXPECTED_RECORD_DOES_NOT_EXIST,
            ephemeral=ephemeral,
        )
        try:
            _key, version = await self._call(path, put, conflict=lambda: NodeExists(path))
        except StoreUnavailable:
            if ephemeral:
                self._end_session_if_gone(path)
            raise
        return _client.to_stat(version, data, num_children=0, owner=self._owner(path, version))

    def _end_session_if_gone(self, path: str) -> None:
        """After a refused ephemeral put: a session the server no longer knows is dropped,
        so the next one opens a new session (and this store's session changes)."""
        shard = _client.shard_of(self._client, path)
        if _client.live_session_id(self._client, shard) is not None:
            self._calls.pool.submit(_client.probe_session, self._client, shard)

    async def _create_parents(self, path: str) -> None:
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            with contextlib.suppress(NodeExists):
                await self._put_new("/" + "/".join(parts[:depth]), b"")

    async def create_sequential(
        self,
        prefix: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        ephemeral: bool = False,
    ) -> tuple[str, Stat]:
        """`<prefix><%010d>` numbered by the parent's modifications count, as Pulsar's
        `OxiaMetadataStore` names sequential keys, with the parent advanced after the child
        is made: a creator that finds number n taken advances the parent from n itself and
        tries n + 1. So every number below the parent's count (its `cversion`) names a child
        that was created, the first is 0, and a create that got no answer leaves no gap.
        Holds for a parent whose value is never set otherwise (each set advances the count).
        `ephemeral`: the child is bound to this store's session on its shard (the parent is
        persistent, and keeps its count when the child goes)."""
        _check_path(prefix)
        parent = parent_of(prefix)
        try:
            await self._must_exist(parent)
        except NoNode:
            if not make_parents:
                raise
            await self._create_parents(prefix)
        for _attempt in range(SEQUENTIAL_ATTEMPTS):
            current = await self.get(parent) if parent != "/" else None
            number = current.cversion if current is not None else 0
            path = f"{prefix}{number:010d}"
            try:
                stat = await self._put_new(path, data, ephemeral=ephemeral)
            except NodeExists:
                await self._advance(parent, current)
                continue
            await self._advance(parent, current)
            return path, stat
        raise StoreUnavailable(prefix, f"lost {SEQUENTIAL_ATTEMPTS} rounds to other creators")

    async def _advance(self, parent: str, current: Versioned | None) -> None:
        """Count one more child in the parent (a put of its own value, if still unchanged).
        Another creator may have done it already; if this gets no answer, the next creator
        does it."""
        if current is None:
            raise MetadataError(parent, "sequential children need a parent record")
        with contextlib.suppress(VersionConflict, NoNode, StoreUnavailable):
            await self.set(parent, current.data, version=current.version)

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        _check_path(path)
        if version == ANY_VERSION:
            version = (await self.get(path)).version
        put = functools.partial(self._client.put, path, data, expected_version_id=version)
        try:
            _key, written = await self._call(path, put, conflict=self._conflict(path, version))
        except VersionConflict as e:
            raise await self._refine(e) from e
        return int(written.version_id())

    async def delete(self, path: str, *, version: int) -> None:
        """Refused (`NotEmpty`) while the key has children, as ZooKeeper and Pulsar's
        `OxiaMetadataStore` refuse it (checked first, with a list of the children)."""
        _check_path(path)
        if await self._list_children(path):
            raise NotEmpty(path)
        await self._delete_checked(path, version)

    async def _delete_checked(self, path: str, version: int) -> None:
        """The conditional delete itself, once the children check found none."""
        expected = None if version == ANY_VERSION else version
        try:
            deleted = await self._call(
                path,
                self._client.delete,
                path,
                expected_version_id=expected,
                conflict=self._conflict(path, version),
            )
        except VersionConflict as e:
            raise await self._refine(e) from e
        if not deleted:
            raise NoNode(path)

    def _conflict(self, path: str, version: int) -> Conflict:
        return lambda: VersionConflict(path, version)

    async def _refine(self, error: VersionConflict) -> MetadataError:
        """Oxia checks the expected version before it looks for the key: a conditional write
        on a missing key is UNEXPECTED_VERSION_ID. A read that finds no key makes it NoNode."""
        try:
            await self._call(error.path, self._client.get, error.path, include_value=False)
        except NoNode as absent:
            return absent
        except MetadataError:
            pass
        return error

    async def delete_many(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        """The children check of every item at once, one list per parent of the items (on
        each shard) rather than one per item; then the conditional deletes of the items
        without children, one write request per shard (`_deletes`). Each item's outcome is
        what `delete` gives for it: `NotEmpty` when the check found children; when the check
        got no answer, that error (nothing of the item was sent); when its write got no
        answer, `StoreUnavailable` (unknown)."""
        if self._many is None:
            raise StoreUnavailable("/", "the store is not open")
        return await self._many.delete(items)


_: type[MetadataStore] = OxiaMetadataStore
