"""Writes exact situations into the real ZooKeeper and S3 for the verifier's tests.

Everything is encoded with `services.metadata`, as Pulsar and BookKeeper would write it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.metadata.ledger_metadata import LedgerMetadata, LedgerState, encode_ledger_metadata
from services.metadata.namespaces import encode_policies, policies_path
from services.metadata.offload import data_object_key, index_object_key, uuid_to_bits
from services.metadata.paths import LAYOUT_ZNODE, LedgerLayout, LedgerPaths, layout_text
from services.metadata.pulsar_formats import (
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)
from services.metadata.pulsar_names import cursor_path, managed_ledger_path, schema_path
from services.metadata.store import MetadataStore
from tombstone.v1 import pending_delete_pb2 as pb

ML = "public/default/persistent/orders"
OTHER_ML = "public/default/persistent/payments"
TOPIC = "persistent://public/default/orders"
CURSOR = "sub-a"
SCHEMA = "public/default/orders"
BUCKET = "offload"
OTHER_BUCKET = "elsewhere"
CLUSTER = "standalone"
EAST = "east"
"""A declared neighbour cluster (the `east` fixture is its metadata store)."""
UUID = "3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a6b"
OTHER_UUID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
PATHS = LedgerPaths()


def data_meta(ml: str = ML) -> dict[str, bytes]:
    return {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": ml.encode(),
    }


def cursor_meta(ml: str = ML, cursor: str = CURSOR) -> dict[str, bytes]:
    return {**data_meta(ml), "pulsar/cursor": cursor.encode()}


def schema_meta(schema_id: str = SCHEMA) -> dict[str, bytes]:
    return {"application": b"pulsar", "component": b"schema", "pulsar/schemaId": schema_id.encode()}


@dataclass(frozen=True)
class Listed:
    """One entry of an ML list; `uuid` gives it an offload context."""

    ledger_id: int
    uuid: str | None = None
    complete: bool = True
    bookkeeper_deleted: bool = False
    bucket: str | None = BUCKET


class World:
    def __init__(self, store: MetadataStore, s3: Any = None) -> None:
        self.store = store
        self.s3 = s3
        self._buckets: set[str] = set()

    async def bookkeeper_root(
        self, layout: LedgerLayout = LedgerLayout.HIERARCHICAL, root: str = PATHS.root
    ) -> None:
        """The ledgers root with its `LAYOUT` (`LedgerLayout.serialize`, as BookKeeper's
        cluster format writes it) and `/managed-ledgers` (Pulsar's cluster metadata setup)."""
        await self.store.create(f"{root}/{LAYOUT_ZNODE}", layout_text(layout), make_parents=True)
        if await self.store.exists("/managed-ledgers") is None:
            await self.store.create("/managed-ledgers")
        await self.namespace("public/default")

    async def namespace(self, name: str, replication_clusters: Sequence[str] = (CLUSTER,)) -> None:
        """The namespace's policies (`PulsarClusterMetadataSetup` creates `public/default`;
        `NamespacesBase.internalCreateNamespace` any other)."""
        path = policies_path(name)
        if await self.store.exists(path) is None:
            data = encode_policies(list(replication_clusters))
            await self.store.create(path, data, make_parents=True)

    async def ledger(
        self,
        ledger_id: int,
        custom: Mapping[str, bytes] | None = None,
        *,
        state: LedgerState = LedgerState.CLOSED,
        ctime: int | None = None,
        path: str | None = None,
    ) -> str:
        metadata = LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=2,
            write_quorum=2,
            ack_quorum=2,
            state=state,
            length=100 if state is LedgerState.CLOSED else 0,
            last_entry_id=9 if state is LedgerState.CLOSED else -1,
            custom_metadata=dict(custom if custom is not None else data_meta()),
            ctime=ctime,
        )
        path = path or PATHS.ledger_path(ledger_id)
        await self.store.create(path, encode_ledger_metadata(metadata), make_parents=True)
        return path

    async def ml(
        self,
        ledgers: Sequence[Listed | int] = (),
        *,
        ml: str = ML,
        properties: Mapping[str, str] | None = None,
        version: int = 0,
    ) -> int:
        """Write the ML znode and bump it to `version`; returns the version."""
        info = ManagedLedgerInfo()
        for entry in ledgers:
            listed = entry if isinstance(entry, Listed) else Listed(entry)
            item = info.ledgerInfo.add(ledgerId=listed.ledger_id, entries=10, size=100, timestamp=1)
            if listed.uuid is not None:
                ctx = item.offloadContext
                ctx.uidMsb, ctx.uidLsb = uuid_to_bits(listed.uuid)
                ctx.complete = listed.complete
                ctx.bookkeeperDeleted = listed.bookkeeper_deleted
                ctx.driverMetadata.name = "aws-s3"
                if listed.bucket is not None:
                    ctx.driverMetadata.properties.add(key="bucket", value=listed.bucket)
        for key, value in (properties or {}).items():
            info.properties.add(key=key, value=value)
        return await self._put(managed_ledger_path(ml), encode_managed_ledger_info(info), version)

    async def cursor(
        self, ledger_id: int, *, ml: str = ML, cursor: str = CURSOR, version: int = 0
    ) -> int:
        info = ManagedCursorInfo(cursorsLedgerId=ledger_id)
        return await self._put(cursor_path(ml, cursor), encode_cursor_info(info), version)

    async def schema(
        self, ledger_ids: Sequence[int], *, schema_id: str = SCHEMA, version: int = 0
    ) -> int:
        locator = SchemaLocator()
        for number, ledger_id in enumerate(ledger_ids):
            entry = locator.index.add(version=number, hash=b"h")
            entry.position.ledgerId, entry.position.entryId = ledger_id, 0
        locator.info.CopyFrom(locator.index[-1])
        return await self._put(schema_path(schema_id), encode_schema_locator(locator), version)

    async def _put(self, path: str, data: bytes, version: int) -> int:
        existing = await self.store.exists(path)
        if existing is None:
            await self.store.create(path, data, make_parents=True)
            current = 0
        else:
            current = await self.store.set(path, data, version=existing.version)
        while current < version:
            current = await self.store.set(path, data, version=current)
        return current

    async def bucket(self, bucket: str = BUCKET) -> None:
        if bucket not in self._buckets:
            await self.s3.create_bucket(Bucket=bucket)
            self._buckets.add(bucket)

    def forget_buckets(self) -> None:
        self._buckets.clear()

    async def objects(
        self,
        ledger_id: int,
        *,
        uuid: str = UUID,
        bucket: str = BUCKET,
        ml: str | None = ML,
        cluster: str | None = CLUSTER,
        index: bool = True,
    ) -> tuple[str, str]:
        keys = (data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id))
        await self.bucket(bucket)
        for key, role in zip(keys if index else keys[:1], ("data", "index"), strict=False):
            metadata = {"role": role}
            if ml is not None:
                metadata["ManagedLedgerName"] = ml
            if cluster is not None:
                metadata["pulsarclustername"] = cluster
            await self.s3.put_object(Bucket=bucket, Key=key, Body=b"x", Metadata=metadata)
        return keys


def pdli(
    ledger_id: int | None = 1,
    *,
    tier: pb.LedgerType.ValueType = pb.LEDGER,
    component: pb.LedgerComponent.ValueType = pb.MANAGED_LEDGER,
    ml: str = ML,
    cursor: str = "",
    schema_id: str = "",
    uuid: str | None = None,
    bucket: str | None = BUCKET,
    driver: str = "aws-s3",
    fence: int | None = None,
    source: pb.Source.ValueType = pb.BROKER,
    cluster: str = CLUSTER,
    topic: str = "",
) -> pb.PendingDeleteLedgerInfo:
    """A PDLI as the marker would send it (override any field to forge one)."""
    message = pb.PendingDeleteLedgerInfo(
        ledger_type=tier,
        component=component,
        cursor_name=cursor,
        schema_id=schema_id,
        source=source,
        cluster=cluster,
        topic_name=topic,
        marker_id="test",
    )
    if component != pb.SCHEMA_STORAGE:
        message.managed_ledger_name = ml
    if ledger_id is not None:
        message.ledger_id = ledger_id
    if fence is not None:
        message.fence_token = fence
    if uuid is not None:
        ctx = message.offload_context
        ctx.uuid_msb, ctx.uuid_lsb = uuid_to_bits(uuid)
        ctx.driver_name = driver
        ctx.complete = True
        if bucket is not None:
            ctx.driver_metadata["bucket"] = bucket
    return message
