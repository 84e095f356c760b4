"""The metadata store port: what the typed stores need from ZooKeeper, and nothing more.

`ZkMetadataStore` (in `zookeeper/`) is the adapter for ZooKeeper, `OxiaMetadataStore` (in
`oxia/`) the one for Oxia. Errors are the typed ones of
`services.metadata.errors`: `NoNode` only when the server said so; anything uncertain is
`StoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from services.metadata.errors import MetadataError

ANY_VERSION = -1
"""ZooKeeper's "any version" for `delete`; never used for a conditional delete."""


@dataclass(frozen=True, slots=True)
class Stat:
    """A znode's stat, as ZooKeeper reports it."""

    version: int
    ctime_ms: int
    mtime_ms: int
    czxid: int
    mzxid: int
    num_children: int
    data_length: int
    ephemeral_owner: int


@dataclass(frozen=True, slots=True)
class Versioned:
    """A znode's data with the stat fields callers need (read in one round trip)."""

    data: bytes
    version: int
    ctime_ms: int
    mtime_ms: int
    czxid: int
    mzxid: int
    cversion: int = 0
    """Changes to the children (ZooKeeper's cversion): the number the next sequential child
    gets, for a parent whose children are only ever created."""


class WatchEvent(enum.Enum):
    """Why a watch fired. After any of them, what was read before may be stale."""

    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    CONNECTION_LOST = "connection_lost"
    """The connection or session was lost (or the store closed): changes may have been missed."""


class MetadataStore(Protocol):
    """A hierarchical, versioned key-value store (ZooKeeper's model)."""

    @property
    def last_zxid(self) -> int | None:
        """The last transaction id the store has seen (for recording scan points); None on a
        store without a global transaction id."""
        ...

    @property
    def connected(self) -> bool:
        """Whether the session is connected now."""
        ...

    @property
    def session_id(self) -> int | None:
        """The current session's id: an ephemeral record's `ephemeral_owner` when it is ours."""
        ...

    async def wait_connected(self) -> None:
        """Return once the session is connected (unbounded: callers bound it)."""
        ...

    def connection_lost(self) -> asyncio.Future[None]:
        """A future done when the connection is next lost or the session ends: from then on
        every watch may have missed events."""
        ...

    async def add_recursive_watch(
        self, path: str, listener: Callable[[WatchEvent, str], None]
    ) -> None:
        """`listener(kind, path)` for every create, data change and delete at or below `path`,
        from now until the connection is lost (events after that are not reported: call
        again once reconnected). `Unsupported` when the store cannot."""
        ...

    async def get(self, path: str) -> Versioned:
        """Data and stat; `NoNode` when absent."""
        ...

    async def sync(self, path: str) -> None:
        """Return once this session's view includes every change committed before the call,
        and the watch events of those changes were delivered (ZooKeeper's `sync`; a store
        whose reads are linearizable returns at once). Orders reads across two sessions."""
        ...

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        """Per path, in order: data and stat, None when absent, or the typed error that left
        it unknown (never None for a failure). Store failures are reported per path, not
        raised; one round trip per chunk of paths."""
        ...

    async def get_and_watch(self, path: str) -> tuple[Versioned, asyncio.Future[WatchEvent]]:
        """Like `get`, plus a future fired once on change, delete or connection loss."""
        ...

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        """The stat (None when absent) and a future fired on create, change, delete or loss."""
        ...

    async def get_children(self, path: str) -> list[str]:
        """Child names (unsorted); `NoNode` when absent."""
        ...

    async def get_children_and_watch(
        self, path: str
    ) -> tuple[list[str], asyncio.Future[WatchEvent]]:
        """Like `get_children`, plus a future fired once when a child is created or deleted
        (`CHANGED`), the znode is deleted, or the connection is lost."""
        ...

    async def exists(self, path: str) -> Stat | None:
        """The stat, or None when the server says the znode does not exist."""
        ...

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Stat:
        """Create a znode (`NodeExists` if present); optionally create missing parents.
        `ephemeral`: it lives as long as this session (parents never are)."""
        ...

    async def create_sequential(
        self,
        prefix: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        ephemeral: bool = False,
    ) -> tuple[str, Stat]:
        """Create the sequential znode `<prefix><10-digit number>` (ZooKeeper appends the
        parent's cversion); return its path and stat. `NoNode` when the parent is absent,
        unless `make_parents`. `ephemeral`: it lives as long as this session (parents never
        are), as a PIP-454 participant's registration does."""
        ...

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        """Compare-and-set; returns the new version. `VersionConflict` or `NoNode`."""
        ...

    async def delete(self, path: str, *, version: int) -> None:
        """Conditional delete. `VersionConflict`, `NoNode` or `NotEmpty`."""
        ...

    async def delete_many(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        """Conditional deletes of (path, version) pairs, many per round trip. Per item, in
        order: None when this call deleted the znode, else the typed error that `delete` would
        have raised for it (`StoreUnavailable` when the outcome is unknown; `Unsupported` when
        the store cannot batch deletes: then nothing was deleted). Store failures are reported
        per item, not raised."""
        ...
