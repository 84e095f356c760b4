"""Model records ↔ the metadata layer's messages (the layer encodes them; this only maps)."""

from __future__ import annotations

import json

from devstack.simulator.model import (
    Cursor,
    LedgerInfo,
    ManagedLedger,
    Offload,
    PartitionedTopic,
    Schema,
    SchemaVersion,
)
from services.metadata import (
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    uuid_from_bits,
    uuid_to_bits,
)
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.formats import schema_pb2 as _schema

# --- managed ledgers -------------------------------------------------------------------


def offload_to_proto(offload: Offload) -> _ml.OffloadContext:
    """The OffloadContext as `ManagedLedgerImpl` writes it; a 2.1 context (no driver name)
    has only uidMsb/uidLsb/complete, as Pulsar 2.1's offloadLoop wrote it."""
    msb, lsb = uuid_to_bits(offload.uuid)
    context = _ml.OffloadContext(uidMsb=msb, uidLsb=lsb, complete=offload.complete)
    if offload.timestamp:
        context.timestamp = offload.timestamp
    # Pulsar sets bookkeeperDeleted only once it is true.
    if offload.bookkeeper_deleted:
        context.bookkeeperDeleted = True
    if not offload.driver_name:
        return context
    context.driverMetadata.name = offload.driver_name
    for key, value in offload.driver_properties:
        context.driverMetadata.properties.add(key=key, value=value)
    return context


def offload_from_proto(context: _ml.OffloadContext, bucket: str) -> Offload:
    props = tuple((kv.key, kv.value) for kv in context.driverMetadata.properties)
    return Offload(
        uuid=uuid_from_bits(context.uidMsb, context.uidLsb),
        complete=context.complete,
        bookkeeper_deleted=context.bookkeeperDeleted,
        timestamp=context.timestamp,
        driver_name=context.driverMetadata.name,
        driver_properties=props,
        bucket=dict(props).get("bucket") or dict(props).get("storageBasePath") or bucket,
    )


def ml_to_proto(ml: ManagedLedger) -> ManagedLedgerInfo:
    info = ManagedLedgerInfo()
    for item in ml.ledgers:
        entry = info.ledgerInfo.add(ledgerId=item.ledger_id, timestamp=item.timestamp)
        if item.entries is not None:
            entry.entries = item.entries
        if item.size is not None:
            entry.size = item.size
        if item.offload is not None:
            entry.offloadContext.CopyFrom(offload_to_proto(item.offload))
    for key, value in ml.properties:
        info.properties.add(key=key, value=value)
    return info


def ml_from_proto(
    name: str, topic: str, info: ManagedLedgerInfo, *, empty: bool, bucket: str
) -> ManagedLedger:
    ledgers = tuple(
        LedgerInfo(
            ledger_id=item.ledgerId,
            entries=item.entries if item.HasField("entries") else None,
            size=item.size if item.HasField("size") else None,
            timestamp=item.timestamp,
            offload=(
                offload_from_proto(item.offloadContext, bucket)
                if item.HasField("offloadContext")
                else None
            ),
        )
        for item in info.ledgerInfo
    )
    props = tuple((kv.key, kv.value) for kv in info.properties)
    return ManagedLedger(name, topic, ledgers, props, empty_znode=empty)


# --- cursors ---------------------------------------------------------------------------


def cursor_to_proto(cursor: Cursor) -> ManagedCursorInfo:
    return ManagedCursorInfo(
        cursorsLedgerId=cursor.cursors_ledger_id,
        markDeleteLedgerId=cursor.mark_delete_ledger_id,
        markDeleteEntryId=cursor.mark_delete_entry_id,
        lastActive=cursor.last_active,
    )


def cursor_from_proto(ml_name: str, name: str, info: ManagedCursorInfo) -> Cursor:
    return Cursor(
        ml_name,
        name,
        info.cursorsLedgerId,
        info.markDeleteLedgerId,
        info.markDeleteEntryId,
        info.lastActive,
    )


# --- schemas ---------------------------------------------------------------------------


def _index_entry(version: SchemaVersion) -> _schema.SchemaIndexEntry:
    return _schema.SchemaIndexEntry(
        version=version.version,
        position=_schema.SchemaPositionInfo(ledgerId=version.ledger_id, entryId=version.entry_id),
        hash=version.hash,
    )


def locator_to_proto(schema: Schema) -> SchemaLocator:
    """`info` is the latest version; `index` lists every version (the ledger references)."""
    locator = SchemaLocator(info=_index_entry(schema.versions[-1]))
    locator.index.extend(_index_entry(v) for v in schema.versions)
    return locator


def schema_from_proto(schema_id: str, locator: SchemaLocator) -> Schema:
    versions = tuple(
        SchemaVersion(e.version, e.position.ledgerId, e.position.entryId, e.hash)
        for e in locator.index
    )
    return Schema(schema_id, versions)


# --- configuration store ---------------------------------------------------------------


def partitioned_znode(topic: PartitionedTopic) -> bytes:
    """`PartitionedTopicMetadata` as Pulsar's Jackson mapper writes it."""
    return json.dumps(
        {"partitions": topic.partitions, "deleted": False}, separators=(",", ":")
    ).encode()


def partitions_from_znode(data: bytes) -> int:
    return int(json.loads(data)["partitions"])


def policies_znode(replication_clusters: list[str]) -> bytes:
    """A new namespace's `Policies` as Pulsar's Jackson mapper writes it (the fields a fresh
    `NamespacesBase.internalCreateNamespace` sets; the rest are null and left out)."""
    policies = {
        "auth_policies": {
            "namespace_auth": {},
            "destination_auth": {},
            "subscription_auth_roles": {},
        },
        "replication_clusters": replication_clusters,
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "is_allow_auto_update_schema": True,
        "schema_validation_enforced": False,
        "properties": {},
    }
    return json.dumps(policies, separators=(",", ":")).encode()
