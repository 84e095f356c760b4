"""`MigrationGuardedStore`: a `MetadataStore` that keeps Tombstone out of PIP-454's way.

What each reading of the migration record (`state.py`) means for the store it is read from
(the source store: Pulsar keeps the record there only):

- no migration, NOT_STARTED or FAILED: everything passes through. FAILED means Pulsar went
  back to the source store (`DualMetadataStore.handleMigrationFailed`), so it is the truth.
- PREPARATION or COPYING: reads pass through, every write is refused with `StoreUnavailable`.
  Pulsar's own `DualMetadataStore.put`/`delete` refuse writes in these phases; a write of ours
  could land after `MigrationCoordinator.copyPersistentData` copied the record, and the Oxia
  copy would never see it. `StoreUnavailable` is an outage to every service: they pause and
  hold their work, spending no retry.
- COMPLETED: reads and writes are refused. Pulsar now reads and writes the Oxia target only,
  so this store is a stale copy: a ledger referenced only in Oxia would look unreferenced
  here, and unknown is never negative. The operator must point Tombstone at Oxia.
- unknown (not read yet, unreadable, undecodable, or the connection was lost since the last
  read): treated as the window, writes refused, until a read says otherwise.

The record is followed by a watch and re-read after every connection loss. Between the
coordinator's write and our watch's notification a write of ours can still pass; the guard
closes that gap as Pulsar's brokers do, by registering as a migration participant
(`participant.py`): every write is counted while in flight, and the coordinator waits for
them to end before it copies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Generic, Self, TypeVar

from services.metadata.errors import MetadataError, StoreUnavailable
from services.metadata.migration.participant import DRAIN_WARNING, Participant
from services.metadata.migration.state import (
    MigrationFollower,
    MigrationPhase,
    MigrationState,
    Reading,
    Unknown,
)
from services.metadata.store import MetadataStore, Stat, Versioned, WatchEvent

STORE_URL_SETTINGS = "TOMBSTONE_METADATA_STORE_URL / TOMBSTONE_BOOKKEEPER_METADATA_URL"
"""The settings that choose the store Tombstone reads (named in the COMPLETED refusal)."""

S = TypeVar("S", bound=MetadataStore)

_WINDOW = frozenset({MigrationPhase.PREPARATION, MigrationPhase.COPYING})
_PASSING = frozenset({MigrationPhase.NOT_STARTED, MigrationPhase.FAILED})


def write_refusal_reason(reading: Reading) -> str | None:
    """Why a write must not be made now, or None when it may."""
    if isinstance(reading, Unknown):
        return f"metadata migration state unknown ({reading.problem}): writes paused"
    if reading.phase in _WINDOW:
        return (
            f"metadata migration to {reading.target_url} in phase {reading.phase}: "
            "writes paused until it completes or fails"
        )
    return read_refusal_reason(reading)


def read_refusal_reason(reading: Reading) -> str | None:
    """Why a read must not be made now, or None when it may."""
    if isinstance(reading, MigrationState) and reading.phase not in _PASSING | _WINDOW:
        return (
            f"metadata migrated to {reading.target_url} (phase {reading.phase}): this store "
            f"is a stale copy; point {STORE_URL_SETTINGS} at the Oxia store and restart"
        )
    return None


class MigrationGuardedStore(Generic[S]):
    """`MetadataStore` over `store`, refusing what PIP-454's phase forbids (module doc).

    Enter it (`async with`) to read the record once, register as a migration participant when
    no migration runs, and start following the record; until then, and after it is closed,
    the state is unknown: reads pass, writes are refused. `inner` is the store itself, for
    what only its adapter offers (ZooKeeper's ACL checks)."""

    def __init__(
        self,
        store: S,
        *,
        retry_delay: float = 1.0,
        listener: Callable[[Reading], None] | None = None,
        participant: Participant | None = None,
        drain_warning: float = DRAIN_WARNING,
        register: bool = True,
    ) -> None:
        """`participant`: another guard's, when the record that governs `store` is kept in
        another store (BookKeeper's metadata in its own chroot follows Pulsar's record); that
        guard keeps its follower current and its registration, and counts this guard's writes
        in flight with its own.

        `register=False`: follow the record without registering. For the sessions Tombstone
        only reads (a neighbour cluster's store, the configuration store): a participant znode
        there would be a write into a store that is not ours to write, and would make another
        cluster's migration wait on a session that never writes to it."""
        self._store: S = store
        self._register = register
        self._owns_participant = participant is None
        if participant is None:
            follower = MigrationFollower(store, retry_delay=retry_delay, listener=listener)
            participant = Participant(
                store, follower, retry_delay=retry_delay, drain_warning=drain_warning
            )
        self.participant = participant
        self.follower = participant.follower
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def inner(self) -> S:
        return self._store

    @property
    def reading(self) -> Reading:
        """What is known of the migration now."""
        return self.follower.reading

    def write_refusal(self) -> StoreUnavailable | None:
        """The error a write would meet now (for outage probes that must see the pause)."""
        reason = write_refusal_reason(self.reading)
        return None if reason is None else StoreUnavailable("/", reason)

    async def __aenter__(self) -> Self:
        if not self._owns_participant:
            return self
        await self.follower.refresh()
        self._tasks.append(
            asyncio.create_task(self.follower.run(), name="metadata-migration-watch")
        )
        if not self._register:
            return self
        # Registered before the first write when the store answers; a failure is retried by
        # the loop below and does not hold writes back (participant.py says why).
        await self.participant.settle()
        self._tasks.append(
            asyncio.create_task(self.participant.run(), name="metadata-migration-participant")
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in reversed(tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _check_write(self, path: str) -> None:
        reason = write_refusal_reason(self.reading)
        if reason is not None:
            raise StoreUnavailable(path, reason)

    def _check_read(self, path: str) -> None:
        reason = read_refusal_reason(self.reading)
        if reason is not None:
            raise StoreUnavailable(path, reason)

    # --- the session: passes through --------------------------------------------------------

    @property
    def last_zxid(self) -> int | None:
        return self._store.last_zxid

    @property
    def connected(self) -> bool:
        return self._store.connected

    @property
    def session_id(self) -> int | None:
        return self._store.session_id

    async def wait_connected(self) -> None:
        await self._store.wait_connected()

    def connection_lost(self) -> asyncio.Future[None]:
        return self._store.connection_lost()

    # --- reads: refused once the data lives elsewhere -----------------------------------------

    async def add_recursive_watch(
        self, path: str, listener: Callable[[WatchEvent, str], None]
    ) -> None:
        self._check_read(path)
        await self._store.add_recursive_watch(path, listener)

    async def get(self, path: str) -> Versioned:
        self._check_read(path)
        return await self._store.get(path)

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        reason = read_refusal_reason(self.reading)
        if reason is not None:  # reported per path, as the port says
            return [StoreUnavailable(path, reason) for path in paths]
        return await self._store.get_many(paths)

    async def get_and_watch(self, path: str) -> tuple[Versioned, asyncio.Future[WatchEvent]]:
        self._check_read(path)
        return await self._store.get_and_watch(path)

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        self._check_read(path)
        return await self._store.watch(path)

    async def get_children(self, path: str) -> list[str]:
        self._check_read(path)
        return await self._store.get_children(path)

    async def get_children_and_watch(
        self, path: str
    ) -> tuple[list[str], asyncio.Future[WatchEvent]]:
        self._check_read(path)
        return await self._store.get_children_and_watch(path)

    async def exists(self, path: str) -> Stat | None:
        self._check_read(path)
        return await self._store.exists(path)

    async def sync(self, path: str) -> None:
        self._check_read(path)
        await self._store.sync(path)

    # --- writes: refused in the window, when unknown and once migrated ------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Stat:
        self._check_write(path)
        with self.participant.writing():
            return await self._store.create(
                path,
                data,
                make_parents=make_parents,
                container_parents=container_parents,
                ephemeral=ephemeral,
            )

    async def create_sequential(
        self,
        prefix: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        ephemeral: bool = False,
    ) -> tuple[str, Stat]:
        self._check_write(prefix)
        with self.participant.writing():
            return await self._store.create_sequential(
                prefix, data, make_parents=make_parents, ephemeral=ephemeral
            )

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        self._check_write(path)
        with self.participant.writing():
            return await self._store.set(path, data, version=version)

    async def delete(self, path: str, *, version: int) -> None:
        self._check_write(path)
        with self.participant.writing():
            await self._store.delete(path, version=version)

    async def delete_many(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        reason = write_refusal_reason(self.reading)
        if reason is not None:  # reported per item, as the port says; nothing was sent
            return [StoreUnavailable(path, reason) for path, _version in items]
        with self.participant.writing():
            return await self._store.delete_many(items)


def guarded_write_refusal(store: MetadataStore) -> StoreUnavailable | None:
    """For a probe that must see a migration pause: the refusal a write on `store` would meet
    now when it is a `MigrationGuardedStore`, else None."""
    if isinstance(store, MigrationGuardedStore):  # any inner store
        return store.write_refusal()
    return None
