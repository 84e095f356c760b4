"""Benchmark of the reconciler analysis on a synthetic extract.

    .venv/bin/python -m benchmarks.reconcile_analyze [--ledgers 10000000 --mls 1000000] [--smoke]

Generates an extract of that size with Spark itself (`spark.range`, so generation is fast),
writes it as Parquet, then times `run_analysis` on `local[2]`. Beside it, the raw rate of the
same engine: one full read of every input table (the least any analysis must do). Printed:
seconds, rows/s of both, and their ratio.

Shape: `K = ledgers / mls` ledgers per managed ledger; the last one of each is its cursor's
ledger, the others are listed data ledgers except every 97th (not_in_list). 1% of topics are
deleted (topic_gone), each first ledger is offloaded (a third of those bookkeeperDeleted but
still in BookKeeper), every 7th offloaded ledger also has an abandoned upload, and ages are
spread over 30 days so a tenth is too young.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from benchmarks._spark import SMOKE_MASTER, SMOKE_OVERRIDES
from benchmarks._truth import parse, require, require_count, run
from services.core.errors import CorruptData
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import AnalysisOutcome, run_analysis
from services.scan.schema import TABLE_KINDS, TABLES
from services.scan.spark import build_session

NOW = 1_700_000_000_000
DAY = 86_400_000
LONG = 4_294_967_296
CLUSTER = "bench"


def _ledger_id(i: Column, half: int) -> Column:
    """Both id layouts: the first half short ids, the second half from 2^32 on."""
    return F.when(i < half, i).otherwise(F.lit(LONG) + i)


def _ml_name(m: Column) -> Column:
    return F.concat(
        F.lit("tenant-"), m % 10, F.lit("/ns-"), m % 1000, F.lit("/persistent/topic-"), m
    )


def _uuid(i: Column, salt: int) -> Column:
    h = F.lpad(F.lower(F.hex(i * 7919 + salt)), 32, "0")
    return F.concat_ws(
        "-",
        *[
            F.substring(h, start, size)
            for start, size in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))
        ],
    )


def _ledgers(spark: SparkSession, n: int, k: int) -> DataFrame:
    half = n // 2
    base = spark.range(n).select(
        F.col("id").alias("i"),
        (F.col("id") / k).cast("long").alias("m"),
        (F.col("id") % k).alias("j"),
    )
    return base.select(
        "i",
        "m",
        "j",
        _ledger_id(F.col("i"), half).alias("ledger_id"),
        _ml_name(F.col("m")).alias("ml"),
        (F.col("m") % 100 != 0).alias("ml_exists"),
    )


def generate(spark: SparkSession, out: Path, n: int, mls: int) -> dict[str, int]:
    """Write a synthetic extract of `n` ledgers over `mls` managed ledgers; return row counts."""
    k = max(2, n // mls)
    led = _ledgers(spark, n, k)
    cursor = F.col("j") == k - 1
    tables: dict[str, DataFrame] = {
        "bk_ledgers": led.select(
            "ledger_id",
            F.when(F.col("ledger_id") >= 2147483647, "/ledgers/000")
            .otherwise("/ledgers/00")
            .alias("subtree"),
            F.lit("CLOSED").alias("state"),
            (F.col("i") % 100000 * 1024).alias("length"),
            F.lit(99).cast("long").alias("last_entry_id"),
            F.lit(3).alias("ensemble_size"),
            F.lit(None).cast("long").alias("ctime_ms"),
            (F.lit(NOW) - (F.col("i") * 7 + F.col("m")) % 30 * DAY - 1).alias("znode_ctime_ms"),
            F.lit(NOW - DAY).alias("znode_mtime_ms"),
            F.lit(1).alias("znode_version"),
            F.lit(3).alias("metadata_format_version"),
            F.lit("pulsar").alias("application"),
            F.lit("managed-ledger").alias("component"),
            F.col("ml").alias("managed_ledger"),
            F.when(cursor, F.lit("sub-0")).alias("cursor"),
            *[
                F.lit(None).cast("string").alias(c)
                for c in (
                    "schema_id",
                    "compacted_topic",
                    "delayed_index_topic",
                    "delayed_index_cursor",
                    "delayed_index_bucket_key",
                )
            ],
            F.create_map(F.lit("application"), F.lit("pulsar").cast("binary")).alias(
                "custom_metadata"
            ),
            F.lit(True).alias("has_pulsar_metadata"),
            F.lit(None).cast("string").alias("decode_error"),
        ),
        "managed_ledgers": spark.range(mls)
        .filter(F.col("id") % 100 != 0)
        .select(
            _ml_name(F.col("id")).alias("ml_name"),
            F.concat(F.lit("tenant-"), F.col("id") % 10).alias("tenant"),
            F.lit(None).cast("string").alias("cluster"),
            F.concat(F.lit("ns-"), F.col("id") % 1000).alias("namespace"),
            F.lit("persistent").alias("domain"),
            F.concat(F.lit("topic-"), F.col("id")).alias("local_name"),
            F.lit(None).cast("int").alias("partition"),
            F.lit(7).alias("znode_version"),
            F.lit(NOW - 40 * DAY).alias("znode_ctime_ms"),
            (F.lit(NOW) - F.col("id") % 20 * DAY).alias("znode_mtime_ms"),
            F.create_map().cast("map<string,string>").alias("properties"),
            F.lit(None).cast("string").alias("shadow_source"),
            F.lit(None).cast("string").alias("decode_error"),
        ),
        "ml_ledgers": _ml_ledgers(led, k),
        "cursors": led.filter(cursor & F.col("ml_exists")).select(
            F.col("ml").alias("ml_name"),
            F.lit("sub-0").alias("cursor_name"),
            F.col("ledger_id").alias("cursors_ledger_id"),
            F.col("ledger_id").alias("mark_delete_ledger_id"),
            F.lit(0).cast("long").alias("mark_delete_entry_id"),
            (F.lit(NOW) - F.col("m") % 60 * DAY).alias("last_active_ms"),
            F.create_map().cast("map<string,bigint>").alias("properties"),
            F.create_map().cast("map<string,string>").alias("cursor_properties"),
            F.create_map().cast("map<string,bigint>").alias("position_properties"),
            F.lit(3).alias("znode_version"),
            F.lit(NOW - 40 * DAY).alias("znode_ctime_ms"),
            F.lit(NOW - DAY).alias("znode_mtime_ms"),
            F.lit(None).cast("string").alias("decode_error"),
        ),
        "schemas": spark.range(max(1, mls // 10)).select(
            F.concat(F.lit("tenant-0/ns-0/schema-"), F.col("id")).alias("schema_id"),
            F.lit(1).alias("locator_version"),
            F.lit(NOW - 40 * DAY).alias("znode_ctime_ms"),
            F.lit(NOW - 40 * DAY).alias("znode_mtime_ms"),
            F.array(
                F.struct(
                    F.lit(0).cast("long").alias("version"),
                    (F.lit(1 << 50) + F.col("id")).alias("ledger_id"),
                    F.lit(0).cast("long").alias("entry_id"),
                )
            ).alias("index"),
            F.lit(None).cast("string").alias("decode_error"),
        ),
        "offload_objects": _objects(led),
        "scan_manifest": _rows(
            spark,
            "scan_manifest",
            [
                {
                    "task_id": f"{kind}-0",
                    "kind": kind,
                    "scope": "/",
                    "rows": 0,
                    "status": "ok",
                    "started_ms": NOW,
                    "ended_ms": NOW,
                }
                for kind in TABLE_KINDS
            ],
        ),
        "scan_run": _rows(
            spark,
            "scan_run",
            [
                {
                    "scan_id": "bench",
                    "cluster_name": CLUSTER,
                    "started_ms": NOW,
                    "ended_ms": NOW,
                    # The objects carry the 2.10 user metadata, as if each was read by HEAD.
                    "objects_headed": True,
                }
            ],
        ),
    }
    counts = {}
    for name, schema in TABLES.items():
        frame = fit(tables[name], schema, name) if name in tables else _empty(spark, name)
        frame.write.mode("overwrite").parquet(str(out / name))
        counts[name] = spark.read.parquet(str(out / name)).count()
    return counts


def fit(frame: DataFrame, schema: StructType, table: str) -> DataFrame:
    """`frame` as the extract schema has `table`: its columns cast to their declared types,
    every column it does not set null. The generator names only what it sets, so a column
    added to the schema later cannot break it; a column the schema does not have is an error
    (the generator describes an extract that no longer exists)."""
    unknown = set(frame.columns) - set(schema.fieldNames())
    if unknown:
        raise CorruptData(f"the synthetic {table!r} sets columns not in the schema: {unknown}")
    return frame.select(
        *[
            (F.col(f.name) if f.name in frame.columns else F.lit(None))
            .cast(f.dataType)
            .alias(f.name)
            for f in schema.fields
        ]
    )


def _rows(spark: SparkSession, table: str, rows: list[dict[str, object]]) -> DataFrame:
    """A small table from rows naming only the columns they set (the rest null)."""
    schema = TABLES[table]
    for row in rows:
        unknown = set(row) - set(schema.fieldNames())
        if unknown:
            raise CorruptData(f"the synthetic {table!r} sets columns not in the schema: {unknown}")
    return spark.createDataFrame(
        [tuple(r.get(n) for n in schema.fieldNames()) for r in rows], schema
    )


def _empty(spark: SparkSession, table: str) -> DataFrame:
    return spark.createDataFrame([], TABLES[table])


def _ml_ledgers(led: DataFrame, k: int) -> DataFrame:
    first = F.col("j") == 0
    return led.filter(F.col("ml_exists") & (F.col("j") < k - 1) & (F.col("i") % 97 != 0)).select(
        F.col("ml").alias("ml_name"),
        "ledger_id",
        F.col("j").cast("int").alias("position"),
        F.lit(1000).cast("long").alias("entries"),
        (F.col("i") % 100000 * 1024).alias("size"),
        F.lit(NOW - 5 * DAY).alias("timestamp_ms"),
        first.alias("offloaded"),
        F.when(first, F.col("i")).alias("offload_uuid_msb"),
        F.when(first, F.col("i")).alias("offload_uuid_lsb"),
        F.when(first, _uuid(F.col("i"), 1)).alias("offload_uuid"),
        F.when(first, F.lit(True)).alias("offload_complete"),
        F.when(first, F.col("i") % 3 == 0).alias("offload_bookkeeper_deleted"),
        F.when(first, F.lit(NOW - 5 * DAY)).alias("offload_timestamp_ms"),
        F.when(first, F.lit("aws-s3")).alias("offload_driver_name"),
        F.when(first, F.lit("offload")).alias("offload_bucket"),
        F.lit(None).cast("map<string,string>").alias("offload_driver_metadata"),
    )


def _objects(led: DataFrame) -> DataFrame:
    offloaded = led.filter(F.col("ml_exists") & (F.col("j") == 0) & (F.col("i") % 97 != 0))
    current = offloaded.select("ledger_id", "ml", _uuid(F.col("i"), 1).alias("uuid"), "i", "m")
    abandoned = offloaded.filter(F.col("i") % 7 == 0).select(
        "ledger_id", "ml", _uuid(F.col("i"), 2).alias("uuid"), "i", "m"
    )
    uploads = current.unionByName(abandoned)
    roles = F.explode(F.array(F.lit("data"), F.lit("index"))).alias("role")
    return uploads.select("*", roles).select(
        F.lit("offload").alias("bucket"),
        F.concat(
            "uuid",
            F.lit("-ledger-"),
            "ledger_id",
            F.when(F.col("role") == "index", "-index").otherwise(""),
        ).alias("key"),
        "ledger_id",
        "uuid",
        "role",
        (F.col("i") % 100000 * 1024).alias("size"),
        (F.lit(NOW) - (F.col("i") * 7 + F.col("m")) % 30 * DAY - 1).alias("last_modified_ms"),
        F.col("ml").alias("managed_ledger_name"),
        F.lit(CLUSTER).alias("cluster_name"),
    )


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def jvm_cpu_seconds(spark: SparkSession) -> float:
    """CPU seconds (user + system) used so far by the Spark JVM and its children."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    pid = gateway.proc.pid  # the launched spark-submit / JVM
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for proc in _descendants(pid):
        try:
            fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks


def raw_read(spark: SparkSession, extract: Path) -> tuple[float, int]:
    """The engine's floor: read every column of every input table once."""
    start = time.perf_counter()
    rows = 0
    for name in TABLES:
        frame = spark.read.parquet(str(extract / name))
        counted = frame.select(F.count("*"), *[F.count(c) for c in frame.columns]).collect()
        rows += counted[0][0]
    return time.perf_counter() - start, rows


#: The verdicts the shape plans (module docstring): a run missing any of them, or refused,
#: measured an analysis of something else.
PLANNED = (
    "ledger:referenced",
    "ledger:not_in_list (not_in_list)",
    "ledger:topic_gone (topic_gone)",
    "ledger:bk_copy_after_offload (bk_copy_after_offload)",
    "object:referenced",
    "object:offload_no_match (offload_no_match)",
)


def check(outcome: AnalysisOutcome, totals: dict[str, int], counts: dict[str, int]) -> None:
    require(not outcome.verdict.refused, f"the analysis refused: {list(outcome.verdict.reasons)}")
    missing = [key for key in PLANNED if not totals.get(key)]
    require(not missing, f"planned verdicts missing: {missing} (got {totals})")
    ledgers = sum(v for k, v in totals.items() if k.startswith("ledger:"))
    require_count("ledgers classified", ledgers, counts["bk_ledgers"])
    objects = sum(v for k, v in totals.items() if k.startswith("object:"))
    require_count("objects classified", objects, counts["offload_objects"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=10_000_000)
    parser.add_argument("--mls", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    parser.add_argument(
        "--reuse", action="store_true", help="reuse the extract already generated in --dir"
    )
    args = parse(parser, {"ledgers": 400, "mls": 40, "master": SMOKE_MASTER})
    work = args.dir or Path(tempfile.mkdtemp(prefix="tombstone-bench-"))
    spark = build_session(args.master, app_name="reconcile-bench", overrides=_sized(args))
    try:
        start = time.perf_counter()
        if args.reuse:
            counts = {t: spark.read.parquet(str(work / "extract" / t)).count() for t in TABLES}
        else:
            counts = generate(spark, work / "extract", args.ledgers, args.mls)
        print(f"extract {counts} ready in {time.perf_counter() - start:.1f} s")
        raw_cpu = jvm_cpu_seconds(spark)
        raw_s, raw_rows = raw_read(spark, work / "extract")
        raw_cpu = jvm_cpu_seconds(spark) - raw_cpu
        config = AnalyzeConfig(cluster=CLUSTER)
        load_before = os.getloadavg()[0]
        cpu = jvm_cpu_seconds(spark)
        start = time.perf_counter()
        outcome = run_analysis(spark, work / "extract", work / "out", config)
        took = time.perf_counter() - start
        cpu = jvm_cpu_seconds(spark) - cpu
        load_after = os.getloadavg()[0]
    finally:
        spark.stop()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    rows = sum(v for k, v in counts.items() if k not in ("scan_manifest", "scan_run"))
    print(
        f"analysis: {took:.1f} s, {rows / took:,.0f} input rows/s "
        f"({counts['bk_ledgers']:,} ledgers, {counts['managed_ledgers']:,} MLs, "
        f"{counts['offload_objects']:,} objects)"
    )
    print(
        f"  Spark JVM CPU: {cpu:.1f} s (machine load average {load_before:.1f} -> "
        f"{load_after:.1f} on {os.cpu_count()} cores)"
    )
    print(
        f"raw read of the same extract: {raw_s:.1f} s ({raw_cpu:.1f} s JVM CPU), "
        f"{raw_rows / raw_s:,.0f} rows/s"
    )
    print(f"ratio analysis/raw: {took / raw_s:.1f}x wall time, {cpu / max(raw_cpu, 0.01):.1f}x CPU")
    print(
        f"refused: {outcome.verdict.refused} {list(outcome.verdict.reasons)}; "
        f"candidates: {outcome.summary['candidates']}"
    )
    totals: dict[str, int] = {}
    for c in outcome.summary["counts"]:
        reason = f" ({c['orphan_reason']})" if c["orphan_reason"] else ""
        key = f"{c['source']}:{c['kind']}{reason}"
        totals[key] = totals.get(key, 0) + c["count"]
    print("counts:", totals)
    check(outcome, totals, counts)


def _sized(args: argparse.Namespace) -> dict[str, str]:
    """A smoke run's few hundred rows take the smoke driver (`benchmarks._spark`)."""
    return SMOKE_OVERRIDES if args.smoke else {}


if __name__ == "__main__":
    run(main)
