"""Rows of the extract tables, built from decoded znodes and listed objects (no I/O here).

Each function returns a dict keyed by the contract's column names (`services.scan.schema`);
`as_tuple` orders it for Spark. A znode that does not decode is still a row, with
`decode_error` set and the columns that need the content left null.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import StructType

from services.core.errors import InvalidArgument
from services.metadata import (
    Versioned,
    parse_object_key,
    topic_from_managed_ledger_name,
    uuid_from_bits,
)
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.formats import schema_pb2 as _schema

Row = dict[str, Any]
SHADOW_SOURCE = "PULSAR.SHADOW_SOURCE"

#: Custom-metadata keys decoded into their own columns.
CUSTOM_COLUMNS = {
    "application": "application",
    "component": "component",
    "pulsar/managed-ledger": "managed_ledger",
    "pulsar/cursor": "cursor",
    "pulsar/schemaId": "schema_id",
    "pulsar/compactedTopic": "compacted_topic",
    "pulsar/delayedIndexTopic": "delayed_index_topic",
    "pulsar/delayedIndexCursor": "delayed_index_cursor",
    "pulsar/delayedIndexBucketKey": "delayed_index_bucket_key",
}


def as_tuple(row: Row, schema: StructType) -> tuple[Any, ...]:
    return tuple(row.get(name) for name in schema.fieldNames())


#: The contract's version columns are 64-bit: ZooKeeper's versions are 32-bit, Oxia's version
#: ids 64-bit (a shard's write counter, past 2^31 on a busy server). A version outside this
#: cannot be recorded, and a wrong one would make a candidate's compare-and-delete name
#: another record's state.
MAX_RECORDED_VERSION = 2**63 - 1


def recorded_version(node: Versioned) -> int:
    """The znode's version as the contract records it; ValueError when it does not fit."""
    if not 0 <= node.version <= MAX_RECORDED_VERSION:
        # Fails the task (the analysis of a run with a failed task proposes nothing).
        raise ValueError(f"version {node.version} does not fit the extract's version columns")
    return node.version


def _znode(node: Versioned) -> Row:
    return {
        "znode_ctime_ms": node.ctime_ms,
        "znode_mtime_ms": node.mtime_ms,
        "znode_version": recorded_version(node),
    }


def managed_ledger_row(ml_name: str, node: Versioned, info: _ml.ManagedLedgerInfo | None) -> Row:
    row: Row = {"ml_name": ml_name, **_znode(node)}
    try:
        topic = topic_from_managed_ledger_name(ml_name)
    except InvalidArgument:
        topic = None
    if topic is not None:
        partition = topic.partition_index
        row.update(
            tenant=topic.tenant,
            cluster=topic.cluster,
            namespace=topic.namespace,
            domain=topic.domain,
            local_name=topic.local_name,
            partition=partition if partition >= 0 else None,
        )
    if info is not None:
        properties = {kv.key: kv.value for kv in info.properties}
        row.update(properties=properties, shadow_source=properties.get(SHADOW_SOURCE))
    return row


def ml_ledger_rows(ml_name: str, info: _ml.ManagedLedgerInfo) -> list[Row]:
    return [_ml_ledger(ml_name, i, li) for i, li in enumerate(info.ledgerInfo)]


def _opt(message: Any, name: str) -> Any:
    return getattr(message, name) if message.HasField(name) else None


def _ml_ledger(ml_name: str, position: int, li: _ml.ManagedLedgerInfo.LedgerInfo) -> Row:
    row: Row = {
        "ml_name": ml_name,
        "ledger_id": li.ledgerId,
        "position": position,
        "entries": _opt(li, "entries"),
        "size": _opt(li, "size"),
        "timestamp_ms": _opt(li, "timestamp"),
        "offloaded": li.HasField("offloadContext"),
    }
    if not li.HasField("offloadContext"):
        return row
    ctx = li.offloadContext
    driver = {kv.key: kv.value for kv in ctx.driverMetadata.properties}
    row.update(
        offload_complete=ctx.complete,
        offload_bookkeeper_deleted=ctx.bookkeeperDeleted,
        offload_timestamp_ms=_opt(ctx, "timestamp"),
        offload_driver_name=ctx.driverMetadata.name if ctx.HasField("driverMetadata") else None,
        offload_bucket=driver.get("bucket") or None,
        offload_driver_metadata=driver,
    )
    if ctx.HasField("uidMsb"):
        row.update(
            offload_uuid_msb=ctx.uidMsb,
            offload_uuid_lsb=ctx.uidLsb,
            offload_uuid=uuid_from_bits(ctx.uidMsb, ctx.uidLsb),
        )
    return row


def cursor_row(
    ml_name: str, cursor: str, node: Versioned, info: _ml.ManagedCursorInfo | None
) -> Row:
    row: Row = {"ml_name": ml_name, "cursor_name": cursor, **_znode(node)}
    if info is None:
        return row
    row.update(
        cursors_ledger_id=info.cursorsLedgerId,
        mark_delete_ledger_id=_opt(info, "markDeleteLedgerId"),
        mark_delete_entry_id=_opt(info, "markDeleteEntryId"),
        last_active_ms=_opt(info, "lastActive"),
        properties={p.name: p.value for p in info.properties},
        cursor_properties={p.name: p.value for p in info.cursorProperties},
        # The cursor ledger's last PositionInfo needs the bookies: not read (contract: null).
        position_properties=None,
    )
    return row


def schema_row(schema_id: str, node: Versioned, locator: _schema.SchemaLocator | None) -> Row:
    znode = _znode(node)
    row: Row = {
        "schema_id": schema_id,
        "locator_version": znode["znode_version"],
        "znode_ctime_ms": znode["znode_ctime_ms"],
        "znode_mtime_ms": znode["znode_mtime_ms"],
    }
    if locator is not None:
        row["index"] = [(e.version, e.position.ledgerId, e.position.entryId) for e in locator.index]
    return row


def object_row(
    bucket: str,
    key: str,
    size: int,
    last_modified_ms: int | None,
    user_metadata: dict[str, str] | None,
) -> Row:
    """An `offload_objects` row; keys that are not `<uuid>-ledger-<id>[-index]` keep nulls."""
    row: Row = {"bucket": bucket, "key": key, "size": size, "last_modified_ms": last_modified_ms}
    try:
        parsed = parse_object_key(key)
    except InvalidArgument:
        parsed = None
    if parsed is not None:
        row.update(
            ledger_id=parsed.ledger_id,
            uuid=parsed.uuid,
            role="index" if parsed.is_index else "data",
        )
    if user_metadata:
        row["managed_ledger_name"] = user_metadata.get("managedledgername")
        row["cluster_name"] = user_metadata.get("pulsarclustername")
    return row
