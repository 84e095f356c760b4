"""Pulsar's metadata store and BookKeeper's, seen as one `MetadataStore` by the devstack's
writers and readers.

A Pulsar cluster whose BookKeeper keeps its ledger metadata apart (Pulsar's
`bookkeeperMetadataServiceUri`, the `bookkeeper` namespace of an Oxia deployment) writes the
ledgers root and everything under it there, and the rest (managed ledgers, cursors, schemas,
`/admin`) in its own store. The simulator, the simulated brokers and the demo's checks write
and read both as one tree; `SplitStore` sends each path to the store that holds it, so the
same code seeds and reads a cluster on one store or on two.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from services.metadata import MetadataStore, Stat, Versioned, WatchEvent
from services.metadata.errors import MetadataError


class SplitStore:
    """Paths at or under `ledgers_root` go to `bookkeeper`, every other path to `pulsar`.
    Calls that take several paths are split per store and their answers put back in order.
    The session properties are Pulsar's store's (the one Tombstone's own records are in)."""

    def __init__(self, pulsar: MetadataStore, bookkeeper: MetadataStore, ledgers_root: str) -> None:
        self.pulsar = pulsar
        self.bookkeeper = bookkeeper
        self.ledgers_root = ledgers_root.rstrip("/")

    def store_of(self, path: str) -> MetadataStore:
        root = self.ledgers_root
        return self.bookkeeper if path == root or path.startswith(f"{root}/") else self.pulsar

    @property
    def last_zxid(self) -> int | None:
        # Two stores have no one transaction id between them.
        return None

    @property
    def connected(self) -> bool:
        return self.pulsar.connected and self.bookkeeper.connected

    @property
    def session_id(self) -> int | None:
        return self.pulsar.session_id

    async def wait_connected(self) -> None:
        await self.pulsar.wait_connected()
        await self.bookkeeper.wait_connected()

    def connection_lost(self) -> asyncio.Future[None]:
        return self.pulsar.connection_lost()

    async def add_recursive_watch(
        self, path: str, listener: Callable[[WatchEvent, str], None]
    ) -> None:
        await self.store_of(path).add_recursive_watch(path, listener)

    async def get(self, path: str) -> Versioned:
        return await self.store_of(path).get(path)

    async def sync(self, path: str) -> None:
        await self.store_of(path).sync(path)

    async def get_many(self, paths: Sequence[str]) -> list[Versioned | MetadataError | None]:
        answers: list[Versioned | MetadataError | None] = [None] * len(paths)
        for store, where in self._partition(paths):
            got = await store.get_many([paths[i] for i in where])
            for i, answer in zip(where, got, strict=True):
                answers[i] = answer
        return answers

    async def get_and_watch(self, path: str) -> tuple[Versioned, asyncio.Future[WatchEvent]]:
        return await self.store_of(path).get_and_watch(path)

    async def watch(self, path: str) -> tuple[Stat | None, asyncio.Future[WatchEvent]]:
        return await self.store_of(path).watch(path)

    async def get_children(self, path: str) -> list[str]:
        return await self.store_of(path).get_children(path)

    async def get_children_and_watch(
        self, path: str
    ) -> tuple[list[str], asyncio.Future[WatchEvent]]:
        return await self.store_of(path).get_children_and_watch(path)

    async def exists(self, path: str) -> Stat | None:
        return await self.store_of(path).exists(path)

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        make_parents: bool = False,
        container_parents: bool = False,
        ephemeral: bool = False,
    ) -> Stat:
        return await self.store_of(path).create(
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
        return await self.store_of(prefix).create_sequential(
            prefix, data, make_parents=make_parents, ephemeral=ephemeral
        )

    async def set(self, path: str, data: bytes, *, version: int) -> int:
        return await self.store_of(path).set(path, data, version=version)

    async def delete(self, path: str, *, version: int) -> None:
        await self.store_of(path).delete(path, version=version)

    async def delete_many(self, items: Sequence[tuple[str, int]]) -> list[MetadataError | None]:
        answers: list[MetadataError | None] = [None] * len(items)
        for store, where in self._partition([path for path, _ in items]):
            got = await store.delete_many([items[i] for i in where])
            for i, answer in zip(where, got, strict=True):
                answers[i] = answer
        return answers

    def _partition(self, paths: Sequence[str]) -> list[tuple[MetadataStore, list[int]]]:
        """Each store with the indexes of the paths it holds (stores holding none left out)."""
        parts = []
        for store in (self.pulsar, self.bookkeeper):
            where = [i for i, path in enumerate(paths) if self.store_of(path) is store]
            if where:
                parts.append((store, where))
        return parts
