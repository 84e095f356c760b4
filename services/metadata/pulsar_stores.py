"""Pulsar's managed-ledger, cursor and schema znodes in the store: typed reads and CAS writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from services.metadata.errors import NoNode
from services.metadata.pulsar_formats import (
    CompressionType,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)
from services.metadata.pulsar_names import (
    DOMAINS,
    MANAGED_LEDGERS_ROOT,
    PERSISTENT,
    SCHEMAS_ROOT,
    check_named_entity,
    cursor_path,
    managed_ledger_path,
    schema_path,
)
from services.metadata.records import Record
from services.metadata.store import MetadataStore, Versioned, WatchEvent

T = TypeVar("T")


def _record(path: str, versioned: Versioned, decode: Callable[[bytes, str], T]) -> Record[T]:
    return Record(
        path=path,
        value=decode(versioned.data, path),
        version=versioned.version,
        ctime_ms=versioned.ctime_ms,
        mtime_ms=versioned.mtime_ms,
        mzxid=versioned.mzxid,
    )


def _ml(data: bytes, path: str) -> ManagedLedgerInfo:
    return decode_managed_ledger_info(data, path=path)


def _cursor(data: bytes, path: str) -> ManagedCursorInfo:
    return decode_cursor_info(data, path=path)


def _schema(data: bytes, path: str) -> SchemaLocator:
    return decode_schema_locator(data, path=path)


async def _children_or_empty(store: MetadataStore, path: str) -> list[str]:
    """Children of `path`; [] only when the server says `path` does not exist."""
    try:
        return sorted(await store.get_children(path))
    except NoNode:
        return []


class ManagedLedgers:
    """`/managed-ledgers/...`: ML lists and their cursors."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        compression: CompressionType = CompressionType.NONE,
        compression_threshold_bytes: int = 0,
    ) -> None:
        self._store = store
        self._compression = compression
        self._threshold = compression_threshold_bytes

    async def read(self, ml_name: str) -> Record[ManagedLedgerInfo]:
        """The ML info and its version; `NoNode` if the topic has no ML znode."""
        path = managed_ledger_path(ml_name)
        return _record(path, await self._store.get(path), _ml)

    async def read_and_watch(
        self, ml_name: str
    ) -> tuple[Record[ManagedLedgerInfo], asyncio.Future[WatchEvent]]:
        """Like `read`, plus a future fired on change, delete or connection loss."""
        path = managed_ledger_path(ml_name)
        versioned, fired = await self._store.get_and_watch(path)
        try:
            return _record(path, versioned, _ml), fired
        except BaseException:
            fired.cancel()
            raise

    async def write(self, ml_name: str, info: ManagedLedgerInfo, *, version: int) -> int:
        """Compare-and-set the ML info at `version`; returns the new version."""
        data = self._encode_ml(info)
        return await self._store.set(managed_ledger_path(ml_name), data, version=version)

    async def create(self, ml_name: str, info: ManagedLedgerInfo | None = None) -> int:
        """Create the ML znode (0 bytes when `info` is None, as Pulsar does), CONTAINER parents."""
        data = b"" if info is None else self._encode_ml(info)
        path = managed_ledger_path(ml_name)
        stat = await self._store.create(path, data, make_parents=True, container_parents=True)
        return stat.version

    async def delete(self, ml_name: str, *, version: int) -> None:
        """Delete the ML znode at `version` (its cursors must be gone first)."""
        await self._store.delete(managed_ledger_path(ml_name), version=version)

    async def tenants(self) -> list[str]:
        return await _children_or_empty(self._store, MANAGED_LEDGERS_ROOT)

    async def namespaces(self, tenant: str) -> list[str]:
        check_named_entity(tenant, "tenant")
        return await _children_or_empty(self._store, f"{MANAGED_LEDGERS_ROOT}/{tenant}")

    async def topics(self, tenant: str, namespace: str, domain: str = PERSISTENT) -> list[str]:
        """Encoded local names of the namespace's managed ledgers."""
        check_named_entity(tenant, "tenant")
        check_named_entity(namespace, "namespace")
        path = f"{MANAGED_LEDGERS_ROOT}/{tenant}/{namespace}/{domain}"
        return await _children_or_empty(self._store, path)

    async def managed_ledger_names(self) -> AsyncIterator[str]:
        """Every ML name (`t/ns/persistent/x`, and V1 `t/cluster/ns/persistent/x`)."""
        for tenant in await self.tenants():
            async for name in self._names_below(tenant, depth=1):
                yield name

    async def _names_below(self, prefix: str, *, depth: int) -> AsyncIterator[str]:
        for child in await _children_or_empty(self._store, f"{MANAGED_LEDGERS_ROOT}/{prefix}"):
            if child in DOMAINS and depth >= 2:
                for topic in await self._topics_at(f"{prefix}/{child}"):
                    yield f"{prefix}/{child}/{topic}"
            elif depth < 3:
                async for name in self._names_below(f"{prefix}/{child}", depth=depth + 1):
                    yield name

    async def _topics_at(self, domain_prefix: str) -> list[str]:
        return await _children_or_empty(self._store, f"{MANAGED_LEDGERS_ROOT}/{domain_prefix}")

    async def cursors(self, ml_name: str) -> list[str]:
        """The cursor names (encoded, as stored) of a managed ledger."""
        return await _children_or_empty(self._store, managed_ledger_path(ml_name))

    async def read_cursor(self, ml_name: str, cursor: str) -> Record[ManagedCursorInfo]:
        path = cursor_path(ml_name, cursor)
        return _record(path, await self._store.get(path), _cursor)

    async def write_cursor(
        self, ml_name: str, cursor: str, info: ManagedCursorInfo, *, version: int
    ) -> int:
        path = cursor_path(ml_name, cursor)
        return await self._store.set(path, self._encode_cursor(info), version=version)

    async def create_cursor(self, ml_name: str, cursor: str, info: ManagedCursorInfo) -> int:
        stat = await self._store.create(cursor_path(ml_name, cursor), self._encode_cursor(info))
        return stat.version

    async def delete_cursor(self, ml_name: str, cursor: str, *, version: int) -> None:
        await self._store.delete(cursor_path(ml_name, cursor), version=version)

    def _encode_ml(self, info: ManagedLedgerInfo) -> bytes:
        return encode_managed_ledger_info(
            info, compression=self._compression, threshold_bytes=self._threshold
        )

    def _encode_cursor(self, info: ManagedCursorInfo) -> bytes:
        return encode_cursor_info(
            info, compression=self._compression, threshold_bytes=self._threshold
        )


class Schemas:
    """`/schemas/<schemaId>`: the schema locators that reference schema ledgers."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    async def read(self, schema_id: str) -> Record[SchemaLocator]:
        path = schema_path(schema_id)
        return _record(path, await self._store.get(path), _schema)

    async def write(self, schema_id: str, locator: SchemaLocator, *, version: int) -> int:
        data = encode_schema_locator(locator)
        return await self._store.set(schema_path(schema_id), data, version=version)

    async def create(self, schema_id: str, locator: SchemaLocator) -> int:
        data = encode_schema_locator(locator)
        path = schema_path(schema_id)
        stat = await self._store.create(path, data, make_parents=True, container_parents=True)
        return stat.version

    async def delete(self, schema_id: str, *, version: int) -> None:
        await self._store.delete(schema_path(schema_id), version=version)

    async def schema_ids(self) -> AsyncIterator[str]:
        """Every schema id (`tenant/ns/topic`) with a locator znode."""
        for tenant in await _children_or_empty(self._store, SCHEMAS_ROOT):
            for ns in await _children_or_empty(self._store, f"{SCHEMAS_ROOT}/{tenant}"):
                for topic in await _children_or_empty(self._store, f"{SCHEMAS_ROOT}/{tenant}/{ns}"):
                    yield f"{tenant}/{ns}/{topic}"
