"""The extract contract: the tables the extract step writes and the analysis reads.

One run directory holds one Parquet dataset per table (`<run>/<table>/`). Every timestamp is
milliseconds since the epoch (UTC) as a long, so no time zone ever enters the analysis.
Ledger ids are longs throughout: ids from the 63-bit generator start at 4294967296. Record
versions are longs too: Oxia's version ids are 64-bit and pass 2^31 on a busy shard.

Reading is strict: a table whose columns are missing or have another type is an error, never
silently filled with nulls (a null `ledger_id` column would make every ledger look
unreferenced).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from services.core.errors import CorruptData, NotFound
from services.scan import parquet_files


def _f(name: str, data_type: DataType, nullable: bool = True) -> StructField:
    return StructField(name, data_type, nullable)


_S, _L, _I, _B = StringType(), LongType(), IntegerType(), BooleanType()

#: One row per ledger metadata znode under the ledgers root.
BK_LEDGERS = StructType(
    [
        _f("ledger_id", _L, False),
        _f("subtree", _S),  # the extract task's subtree, e.g. "/ledgers/00" or "/ledgers/000"
        _f("state", _S),  # OPEN, IN_RECOVERY or CLOSED
        _f("length", _L),  # bytes; 0 while OPEN
        _f("last_entry_id", _L),
        _f("ensemble_size", _I),
        _f("ctime_ms", _L),  # the metadata's own ctime field, when present
        _f("znode_ctime_ms", _L),
        _f("znode_mtime_ms", _L),
        _f("znode_version", _L),
        _f("metadata_format_version", _I),
        # Custom metadata decoded (UTF-8) into columns; null when the key is absent.
        _f("application", _S),
        _f("component", _S),
        _f("managed_ledger", _S),  # pulsar/managed-ledger
        _f("cursor", _S),  # pulsar/cursor
        _f("schema_id", _S),  # pulsar/schemaId
        _f("compacted_topic", _S),  # pulsar/compactedTopic (persistent://t/ns/x)
        _f("delayed_index_topic", _S),  # pulsar/delayedIndexTopic
        _f("delayed_index_cursor", _S),  # pulsar/delayedIndexCursor
        _f("delayed_index_bucket_key", _S),  # pulsar/delayedIndexBucketKey
        _f("custom_metadata", MapType(_S, BinaryType(), True)),  # the raw map
        _f("has_pulsar_metadata", _B),  # application == "pulsar"
        _f("decode_error", _S),  # set when the znode could not be decoded
    ]
)

#: One row per managed-ledger znode (/managed-ledgers/<ml_name>).
MANAGED_LEDGERS = StructType(
    [
        _f("ml_name", _S, False),
        _f("tenant", _S),
        _f("cluster", _S),  # V1 topics only
        _f("namespace", _S),  # the namespace part alone, e.g. "default"
        _f("domain", _S),
        _f("local_name", _S),  # decoded
        _f("partition", _I),  # null when not a partition
        _f("znode_version", _L),
        _f("znode_ctime_ms", _L),
        _f("znode_mtime_ms", _L),
        _f("properties", MapType(_S, _S, True)),
        _f("shadow_source", _S),  # properties["PULSAR.SHADOW_SOURCE"]
        _f("decode_error", _S),
        _f("metadata_cluster", _S),  # METADATA_CLUSTER
    ]
)

#: One row per LedgerInfo of a managed ledger's list (exploded).
ML_LEDGERS = StructType(
    [
        _f("ml_name", _S, False),
        _f("ledger_id", _L, False),
        _f("position", _I),  # index in the list, 0-based
        _f("entries", _L),
        _f("size", _L),
        _f("timestamp_ms", _L),  # 0 for the open last ledger
        _f("offloaded", _B),  # an offload context is present
        _f("offload_uuid_msb", _L),
        _f("offload_uuid_lsb", _L),
        _f("offload_uuid", _S),  # lowercase, with dashes, as in object keys
        _f("offload_complete", _B),
        _f("offload_bookkeeper_deleted", _B),
        _f("offload_timestamp_ms", _L),
        _f("offload_driver_name", _S),
        _f("offload_bucket", _S),  # driverMetadata["bucket"]
        _f("offload_driver_metadata", MapType(_S, _S, True)),
        _f("metadata_cluster", _S),  # METADATA_CLUSTER
    ]
)

#: One row per cursor znode (/managed-ledgers/<ml_name>/<cursor_name>).
CURSORS = StructType(
    [
        _f("ml_name", _S, False),
        _f("cursor_name", _S, False),
        _f("cursors_ledger_id", _L),  # -1: no ledger
        _f("mark_delete_ledger_id", _L),
        _f("mark_delete_entry_id", _L),
        _f("last_active_ms", _L),
        _f("properties", MapType(_S, _L, True)),  # mark-delete LongProperty
        _f("cursor_properties", MapType(_S, _S, True)),  # StringProperty (delayed buckets)
        # Mark-delete properties of the cursor ledger's last PositionInfo, when the extract
        # read it (the live CompactedTopicLedger of an active __compaction cursor); else null.
        _f("position_properties", MapType(_S, _L, True)),
        _f("znode_version", _L),
        _f("znode_ctime_ms", _L),
        _f("znode_mtime_ms", _L),
        _f("decode_error", _S),
        _f("metadata_cluster", _S),  # METADATA_CLUSTER
    ]
)

SCHEMA_INDEX_ENTRY = StructType(
    [_f("version", _L), _f("ledger_id", _L), _f("entry_id", _L)],
)

#: One row per schema locator (/schemas/<schema_id>).
SCHEMAS = StructType(
    [
        _f("schema_id", _S, False),
        _f("locator_version", _L),  # the znode version
        _f("znode_ctime_ms", _L),
        _f("znode_mtime_ms", _L),
        _f("index", ArrayType(SCHEMA_INDEX_ENTRY, True)),
        _f("decode_error", _S),
        _f("metadata_cluster", _S),  # METADATA_CLUSTER
    ]
)

#: One row per namespace with a policies znode in the configuration store
#: (`/admin/policies/<tenant>/<ns>`, V1 `/admin/policies/<tenant>/<cluster>/<ns>`).
NAMESPACES = StructType(
    [
        _f("namespace", _S, False),  # tenant/ns or tenant/cluster/ns
        _f("replication_clusters", ArrayType(_S, True)),
        _f("decode_error", _S),
    ]
)

#: One row per object in an allowed bucket.
OFFLOAD_OBJECTS = StructType(
    [
        _f("bucket", _S, False),
        _f("key", _S, False),
        _f("ledger_id", _L),  # parsed from the key; null when the key is not Pulsar's
        _f("uuid", _S),  # parsed from the key
        _f("role", _S),  # "data" or "index", from the key
        _f("size", _L),
        _f("last_modified_ms", _L),
        _f("managed_ledger_name", _S),  # user metadata managedledgername (2.10+)
        _f("cluster_name", _S),  # user metadata pulsarclustername (2.10+)
    ]
)

#: One row per extract task.
SCAN_MANIFEST = StructType(
    [
        _f("task_id", _S, False),
        _f("kind", _S, False),  # one of TABLE_KINDS
        _f("scope", _S),  # the subtree or the bucket/prefix the task covered
        _f("rows", _L),
        _f("status", _S, False),  # ok, failed or truncated
        _f("error", _S),
        _f("started_ms", _L),
        _f("ended_ms", _L),
        _f("zxid", _L),  # the highest zxid the task saw (ZooKeeper tasks)
    ]
)

#: One row: the scan as a whole. `started_ms` is "now" for every age computed.
SCAN_RUN = StructType(
    [
        _f("scan_id", _S, False),
        _f("cluster_name", _S),
        _f("started_ms", _L, False),
        _f("ended_ms", _L),
        # Whether Pulsar-named objects were read with HEAD (their `managed_ledger_name` and
        # `cluster_name`); false with `--no-head-objects`. Null in extracts written before
        # it was recorded: unknown.
        _f("objects_headed", _B),
        # The clusters declared as sharing the ledgers root (`--shared-cluster`), whose
        # reference znodes the extract read too. Null in extracts written before: none.
        _f("shared_clusters", ArrayType(_S, True)),
    ]
)

#: Which cluster's metadata store a reference row was read from: null for the scanned
#: cluster, else the name of a cluster declared as sharing its BookKeeper (`--shared-cluster`).
METADATA_CLUSTER = "metadata_cluster"

#: Columns added to the contract later: an extract written before has none, and reads them
#: as null (unknown), never as a default value.
OPTIONAL_COLUMNS: dict[str, frozenset[str]] = {
    "scan_run": frozenset({"objects_headed", "shared_clusters"}),
    "managed_ledgers": frozenset({METADATA_CLUSTER}),
    "ml_ledgers": frozenset({METADATA_CLUSTER}),
    "cursors": frozenset({METADATA_CLUSTER}),
    "schemas": frozenset({METADATA_CLUSTER}),
}
#: Columns that earlier extracts wrote as int and the contract now has as bigint (record
#: versions: ZooKeeper's are 32-bit, Oxia's 64-bit). An older extract's int column is read
#: widened, which loses nothing; any other type mismatch is still an error.
WIDENED_COLUMNS: dict[str, frozenset[str]] = {
    "bk_ledgers": frozenset({"znode_version"}),
    "managed_ledgers": frozenset({"znode_version"}),
    "cursors": frozenset({"znode_version"}),
    "schemas": frozenset({"locator_version"}),
}
#: Tables added later: an extract written before has none and reads them empty. Whether the
#: extract read them is told by its manifest (a `namespaces` task), never by emptiness.
OPTIONAL_TABLES = frozenset({"namespaces"})

TABLES: dict[str, StructType] = {
    "bk_ledgers": BK_LEDGERS,
    "managed_ledgers": MANAGED_LEDGERS,
    "ml_ledgers": ML_LEDGERS,
    "cursors": CURSORS,
    "schemas": SCHEMAS,
    "offload_objects": OFFLOAD_OBJECTS,
    "namespaces": NAMESPACES,
    "scan_manifest": SCAN_MANIFEST,
    "scan_run": SCAN_RUN,
}

#: The kinds of extract task; each must have run successfully for a deletion to be proposed.
TABLE_KINDS = (
    "bk_ledgers",
    "managed_ledgers",
    "cursors",
    "schemas",
    "offload_objects",
)
TASK_STATUSES = ("ok", "failed", "truncated")


@dataclass(frozen=True)
class Extract:
    """The DataFrames of one extract run, each conforming to its schema above."""

    bk_ledgers: DataFrame
    managed_ledgers: DataFrame
    ml_ledgers: DataFrame
    cursors: DataFrame
    schemas: DataFrame
    offload_objects: DataFrame
    namespaces: DataFrame
    scan_manifest: DataFrame
    scan_run: DataFrame


def conform(df: DataFrame, schema: StructType, table: str) -> DataFrame:
    """Select `schema`'s columns from `df` in order; a missing or mistyped column is an error
    (a column of OPTIONAL_COLUMNS that is missing reads as null, an int column of
    WIDENED_COLUMNS reads as bigint)."""
    actual = {field.name: field.dataType for field in df.schema.fields}
    optional = OPTIONAL_COLUMNS.get(table, frozenset())
    widened = WIDENED_COLUMNS.get(table, frozenset())
    for field in schema.fields:
        if field.name not in actual and field.name in optional:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
            continue
        if field.name not in actual:
            raise CorruptData(f"extract table {table!r} has no column {field.name!r}")
        if field.name in widened and isinstance(actual[field.name], IntegerType):
            df = df.withColumn(field.name, F.col(field.name).cast(field.dataType))
            continue
        if not _same_type(actual[field.name], field.dataType):
            raise CorruptData(
                f"extract table {table!r} column {field.name!r} is "
                f"{actual[field.name].simpleString()}, expected {field.dataType.simpleString()}"
            )
    return df.select(*[field.name for field in schema.fields])


def _same_type(actual: DataType, expected: DataType) -> bool:
    """Compare types ignoring nullability (Parquet makes every column nullable)."""
    return actual.simpleString() == expected.simpleString()


def read_extract(spark: SparkSession, run_dir: str | Path) -> Extract:
    """Read every table of a run directory, checking each against its schema."""
    base = Path(run_dir)
    frames: dict[str, DataFrame] = {}
    for table, schema in TABLES.items():
        path = base / table
        if not path.exists() and table in OPTIONAL_TABLES:
            frames[table] = spark.createDataFrame([], schema)
            continue
        if not path.exists():
            raise NotFound(f"extract run {base} has no table {table!r} ({path})")
        frames[table] = conform(_read_parquet(spark, path), schema, table)
    return Extract(**frames)


#: Where Spark keeps the schema it wrote in each Parquet file's footer.
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"


def _read_parquet(spark: SparkSession, path: Path) -> DataFrame:
    """A table written by Spark, read with the schema in its first file's footer, as Spark's
    own inference does without schema merging; inferring it is a Spark job of its own, this is
    a footer read on the driver. Anything else (no such footer, no file) Spark infers."""
    written = (parquet_files.first_footer(path) or {}).get(SPARK_SCHEMA_KEY)
    if written is None:
        return spark.read.parquet(str(path))
    return spark.read.schema(StructType.fromJson(json.loads(written))).parquet(str(path))


def write_extract(extract: Extract, run_dir: str | Path) -> None:
    """Write every table of `extract` as Parquet under `run_dir` (overwriting)."""
    base = Path(run_dir)
    for item in fields(Extract):
        schema = TABLES[item.name]
        frame = conform(getattr(extract, item.name), schema, item.name)
        frame.write.mode("overwrite").parquet(str(base / item.name))


def extract_from_rows(spark: SparkSession, rows: dict[str, list[dict[str, object]]]) -> Extract:
    """Build an Extract from plain rows per table; missing columns are null, tables empty.

    Used by tests and by small hand-made extracts. An unknown table or column is an error.
    """
    unknown = set(rows) - set(TABLES)
    if unknown:
        raise CorruptData(f"unknown extract tables: {sorted(unknown)}")
    frames = {
        table: spark.createDataFrame(
            [_as_tuple(row, schema, table) for row in rows.get(table, [])], schema
        )
        for table, schema in TABLES.items()
    }
    return Extract(**frames)


def _as_tuple(row: dict[str, object], schema: StructType, table: str) -> tuple[object, ...]:
    extra = set(row) - set(schema.fieldNames())
    if extra:
        raise CorruptData(f"extract table {table!r} has no columns {sorted(extra)}")
    return tuple(row.get(name) for name in schema.fieldNames())
