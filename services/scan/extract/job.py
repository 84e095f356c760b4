"""The extract job: the metadata stores and the allowed buckets → an extract run directory.

The driver records the scan's start (before any listing), lists the work units, and runs
them as one Spark job with one partition per unit: each task opens its own metadata-store
session (ZooKeeper or Oxia) or S3 client in its own asyncio loop and yields rows of the
contract (`services.scan.schema`) plus its manifest row. Rows are cached once and written
table by table.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructField, StructType

from services.scan.extract.rows import Row, as_tuple
from services.scan.extract.units import ExtractSettings, Unit, now_ms, plan_units, read_unit
from services.scan.progress import TaskProgress
from services.scan.schema import TABLES, Extract, write_extract

log = structlog.get_logger(__name__)
JOB_GROUP = "tombstone-extract"
ROWS_PER_FILE = 1_000_000


@dataclass(frozen=True)
class ExtractOutcome:
    run_dir: Path
    scan_id: str
    started_ms: int
    ended_ms: int
    zxid: int | None
    manifest: list[dict[str, Any]]

    @property
    def problems(self) -> list[dict[str, Any]]:
        """Manifest rows of tasks that failed or were truncated."""
        return [row for row in self.manifest if row["status"] != "ok"]


#: Tables the tasks produce; one wide row holds one of them (the others are null), so the
#: rows cross from Python into the JVM once and every table is then a JVM-side projection.
TASK_TABLES = tuple(t for t in TABLES if t != "scan_run")
WIDE = StructType([StructField(t, TABLES[t], True) for t in TASK_TABLES])
#: The wide row as Arrow: the tasks hand their rows to the JVM as Arrow record batches
#: (`mapInArrow`), a column at a time, instead of pickling one tuple per row.
WIDE_ARROW = to_arrow_schema(WIDE)
_TYPES = {t: WIDE_ARROW.field(t).type for t in TASK_TABLES}


def run_partition(
    settings: ExtractSettings, units: Sequence[Unit], ids: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The body of one Spark task: the rows of the units whose indexes `ids` carries, as
    record batches of WIDE_ARROW, one table per batch."""
    for batch in ids:
        for index in batch.column(0).to_pylist():
            result = asyncio.run(read_unit(units[index], settings))
            if result.ledgers is not None and len(result.ledgers):
                yield _wide("bk_ledgers", result.ledgers.arrow(_TYPES["bk_ledgers"]))
            tables: dict[str, list[Row]] = {}
            for table, row in result.rows:
                tables.setdefault(table, []).append(row)
            for table, rows in tables.items():
                yield _wide(table, pa.array(rows, type=_TYPES[table]))


def _wide(table: str, values: pa.Array) -> pa.RecordBatch:
    n = len(values)
    columns = [values if t == table else pa.nulls(n, _TYPES[t]) for t in TASK_TABLES]
    return pa.RecordBatch.from_arrays(columns, schema=WIDE_ARROW)


def run_extract(
    spark: SparkSession,
    settings: ExtractSettings,
    run_dir: str | Path,
    *,
    after_listing: Callable[[list[Unit]], None] | None = None,
    progress: bool = False,
) -> ExtractOutcome:
    """Extract into `run_dir`. `after_listing` runs on the driver once the units are known
    (a test hook: fault injection between the listing and the reads)."""
    started = now_ms()
    units, driver_rows, zxid = asyncio.run(plan_units(settings))
    log.info("extract units listed", units=len(units), zxid=zxid)
    if after_listing is not None:
        after_listing(units)
    sc = spark.sparkContext
    # One partition per unit, so one Spark task each; a task gets its unit's index.
    indexes = spark.range(0, len(units), 1, numPartitions=max(1, len(units)))
    wide = indexes.mapInArrow(partial(run_partition, settings, units), WIDE)
    wide = wide.persist(StorageLevel.MEMORY_AND_DISK)
    sc.setJobGroup(JOB_GROUP, "tombstone extract")
    with TaskProgress(sc, JOB_GROUP, enabled=progress, total=len(units), unit="units"):
        counted = wide.select([F.count(F.col(t)).alias(t) for t in TASK_TABLES]).collect()[0]
    ended = now_ms()
    scan_id = f"{settings.cluster}-{started}-{uuid.uuid4().hex[:8]}"
    frames = {t: _table(wide, t, int(counted[t])) for t in TASK_TABLES}
    driver_manifest = spark.createDataFrame(
        [as_tuple(row, TABLES["scan_manifest"]) for row in driver_rows], TABLES["scan_manifest"]
    )
    frames["scan_manifest"] = frames["scan_manifest"].unionByName(driver_manifest)
    run_row: Row = {
        "scan_id": scan_id,
        "cluster_name": settings.cluster,
        "started_ms": started,
        "ended_ms": ended,
        "objects_headed": settings.head_objects,
        "shared_clusters": [shared.name for shared in settings.shared_clusters],
    }
    frames["scan_run"] = spark.createDataFrame(
        [as_tuple(run_row, TABLES["scan_run"])], TABLES["scan_run"]
    )
    out = Path(run_dir)
    write_extract(Extract(**frames), out)
    manifest = [r.asDict() for r in frames["scan_manifest"].collect()]
    wide.unpersist()
    _log_manifest(manifest, len(units))
    return ExtractOutcome(out, scan_id, started, ended, zxid, manifest)


def _table(wide: DataFrame, table: str, size: int) -> DataFrame:
    # One output partition per ROWS_PER_FILE rows: small tables become one file, written by
    # one task, instead of one nearly empty file per extract task.
    parts = max(1, -(-size // ROWS_PER_FILE))
    return wide.filter(F.col(table).isNotNull()).select(f"{table}.*").coalesce(parts)


def _log_manifest(manifest: list[dict[str, Any]], units: int) -> None:
    for row in manifest:
        if row["status"] != "ok":
            log.warning(
                "extract task did not finish",
                task=row["task_id"],
                status=row["status"],
                error=row["error"],
            )
    # The manifest counts every task (the driver's listings and what each unit read), more
    # than the units the progress bar counts: both are given so neither is mistaken for the other.
    log.info("extract done", units=units, tasks=len(manifest))


def manifest_counts(manifest: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Rows per table kind and tasks per status, for the CLI's summary line."""
    rows: dict[str, int] = {}
    statuses: dict[str, int] = {}
    for row in manifest:
        if not str(row["task_id"]).startswith("list:"):
            rows[row["kind"]] = rows.get(row["kind"], 0) + int(row["rows"] or 0)
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return {"rows": rows, "tasks": statuses}
