"""What the report needs beyond the counts, gathered once on the driver into summary.json.

Scan coverage from the manifest (also written as `tasks.csv`), the list of items that are not
referenced with a reason each (all of them in `items.csv`, the first `TOP_ITEMS` in the
summary), orphan ages in bins that fit the age window, and what a submit would send.
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from services.scan.report.format import HELD_BACK, KIND_REASONS, OTHER_CLUSTER_PREFIX, REFUSED_RUN

ITEMS_CSV = "items.csv"
TASKS_CSV = "tasks.csv"
#: Items listed in the summary and the HTML report (items.csv holds all).
TOP_ITEMS = 200
#: Every task is listed in the report up to this many (tasks.csv always holds all).
MAX_LISTED_TASKS = 500
MAX_PROBLEMS = 100
TASK_COLUMNS = ("task_id", "kind", "scope", "status", "rows", "error", "started_ms", "ended_ms")
_MIN, _HOUR, _DAY = 60, 3600, 86_400
#: Age bin edges in seconds; the age window is added as an edge of its own, so the window's
#: line falls exactly between two bars, whatever its length.
AGE_EDGES_S = (
    0,
    _MIN,
    10 * _MIN,
    _HOUR,
    6 * _HOUR,
    _DAY,
    2 * _DAY,
    3 * _DAY,
    7 * _DAY,
    14 * _DAY,
    30 * _DAY,
    90 * _DAY,
    365 * _DAY,
)
NO_BUCKET = "(no bucket allowed)"


def coverage(manifest: Sequence[Mapping[str, Any]], out: Path) -> dict[str, Any]:
    """Tasks per kind and status, the listings, the problems, zxids; writes tasks.csv."""
    listings = [dict(r) for r in manifest if str(r["task_id"]).startswith("list:")]
    tasks = [r for r in manifest if not str(r["task_id"]).startswith("list:")]
    by_kind: dict[str, dict[str, Any]] = {}
    for row in tasks:
        entry = by_kind.setdefault(row["kind"], {"kind": row["kind"], "rows": 0})
        entry[row["status"]] = entry.get(row["status"], 0) + 1
        entry["rows"] += int(row["rows"] or 0)
    problems = sorted((dict(r) for r in manifest if r["status"] != "ok"), key=_task_order)
    zxids = [int(r["zxid"]) for r in tasks if r.get("zxid") is not None]
    listing_zxids = [int(r["zxid"]) for r in listings if r.get("zxid") is not None]
    ordered = sorted((dict(r) for r in manifest), key=_task_order)
    _write_tasks(ordered, out / TASKS_CSV)
    return {
        "tasks": len(manifest),
        "by_kind": [by_kind[k] for k in sorted(by_kind)],
        "listings": sorted(listings, key=_task_order),
        "problems": problems[:MAX_PROBLEMS],
        "problem_count": len(problems),
        "zxid_min": min(zxids, default=None),
        "zxid_max": max(zxids, default=None),
        "zxid_listing": max(listing_zxids, default=None),
        **_objects_source(listings, tasks),
        "task_list": ordered if len(ordered) <= MAX_LISTED_TASKS else None,
        "csv": TASKS_CSV,
    }


def _task_order(row: Mapping[str, Any]) -> tuple[str, str]:
    return (str(row["kind"]), str(row["task_id"]))


def _objects_source(
    listings: Sequence[Mapping[str, Any]], tasks: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """How the offload tier was read: not at all, a live listing, or inventory files."""
    scopes = {str(r["scope"]) for r in tasks if r["kind"] == "offload_objects"}
    # An extract without the listing's row (older runs) is judged by its object tasks.
    scope = next(
        (r["scope"] for r in listings if r["kind"] == "offload_objects"),
        ",".join(sorted(scopes)) or NO_BUCKET,
    )
    buckets = [] if scope == NO_BUCKET else str(scope).split(",")
    if not buckets:
        source = "none"
    elif scopes <= set(buckets):
        source = "a live listing"
    else:
        source = "S3 Inventory files"
    return {"object_source": source, "buckets": buckets}


def _write_tasks(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, [*TASK_COLUMNS, "zxid"], extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "zxid": _hex(row.get("zxid"))})


def _hex(zxid: Any) -> str:
    return "" if zxid is None else f"0x{int(zxid):x}"


def _reasons() -> Column:
    return F.create_map(*[F.lit(part) for pair in KIND_REASONS.items() for part in pair])


def report_items(
    ledger_findings: DataFrame, object_findings: DataFrame, candidates: DataFrame, refused: bool
) -> DataFrame:
    """Every finding that is not referenced, with `proposed` (it is a written candidate)
    and a `reason`. Objects are listed one by one; an object is proposed when its upload is."""
    ledgers = ledger_findings.filter(F.col("kind") != "referenced").select(
        F.lit("ledger").alias("source"),
        (F.col("deletable") & F.lit(not refused)).alias("proposed"),
        *_common(ledger_findings),
    )
    uploads = candidates.filter(F.col("ledger_type") == "OFFLOAD_LEDGER").select(
        "bucket", "ledger_id", "uuid", F.lit(True).alias("in_candidate")
    )
    objects = (
        object_findings.filter(F.col("kind") != "referenced")
        .withColumn("uuid", F.lower("uuid"))
        .join(uploads, ["bucket", "ledger_id", "uuid"], "left")
        .select(
            F.lit("object").alias("source"),
            F.coalesce("in_candidate", F.lit(False)).alias("proposed"),
            *_common(object_findings),
        )
    )
    reasons = _reasons()
    kind_text = F.coalesce(reasons[F.col("kind")], F.col("kind"))
    reason = (
        F.when(
            F.col("kind") == "other_cluster",
            F.concat(F.lit(f"{OTHER_CLUSTER_PREFIX} "), F.col("cluster_name")),
        )
        .when(F.col("proposed"), kind_text)
        .when(F.col("deletable") & F.lit(refused), F.lit(REFUSED_RUN))
        .when(F.col("deletable"), F.lit(HELD_BACK))
        .when(
            F.col("kind") == "neighbour_owner",
            F.concat(F.lit("never proposed: its owner exists in cluster "), "neighbour_cluster"),
        )
        .when(
            F.col("kind").isin("too_young", "replicated_undeclared")
            & F.col("orphan_reason").isNotNull(),
            F.concat(kind_text, F.lit(" (else: "), reasons[F.col("orphan_reason")], F.lit(")")),
        )
        .otherwise(kind_text)
    )
    return ledgers.unionByName(objects).withColumn("reason", reason)


def _common(df: DataFrame) -> list[Column]:
    """The columns both tiers share (null where a tier has none)."""
    have = set(df.columns)

    def col(name: str, kind: str = "string") -> Column:
        return F.col(name) if name in have else F.lit(None).cast(kind).alias(name)

    return [
        col("deletable", "boolean"),
        col("kind"),
        col("orphan_reason"),
        col("namespace"),
        col("ml_name"),
        col("cursor_name"),
        col("schema_id"),
        col("ledger_id", "long"),
        col("state"),
        col("bucket"),
        col("key"),
        col("uuid"),
        col("cluster_name"),
        col("neighbour_cluster"),
        col("size_bytes", "long"),
        col("age_ms", "long"),
    ]


def _item_order() -> list[Column]:
    return [
        F.col("proposed").desc(),
        F.col("size_bytes").desc_nulls_last(),
        F.col("source"),
        F.col("ledger_id"),
    ]


def summarize_items(
    items: DataFrame, out: Path, edges_s: Sequence[int]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Write items.csv (every item, names decoded); return the counts with the top items,
    and the orphans' age bins (one grouping gives both)."""
    groups = [r.asDict() for r in _grouped(items, edges_s).collect()]
    top = [row.asDict() for row in items.orderBy(*_item_order()).limit(TOP_ITEMS).collect()]
    _write_items_csv(items, out)
    bins: dict[tuple[str, int], int] = {}
    for g in groups:
        if g["orphan"]:
            key = (g["source"], g["bin"])
            bins[key] = bins.get(key, 0) + g["count"]
    summary = {
        "total": sum(g["count"] for g in groups),
        "proposed": sum(g["count"] for g in groups if g["proposed"]),
        "shown": top,
        "csv": ITEMS_CSV,
    }
    ages = [{"source": s, "bin": b, "count": c} for (s, b), c in sorted(bins.items())]
    return summary, ages


def _grouped(items: DataFrame, edges_s: Sequence[int]) -> DataFrame:
    """Items per (source, proposed, orphan with a known age, age bin). Bin i holds ages in
    [edges[i], edges[i+1]), the last bin everything older; a negative age (a time in the
    future, an unknown time) falls in bin 0."""
    index: Column = F.lit(0)
    for edge in edges_s[1:]:
        index = index + F.when(F.col("age_ms") >= edge * 1000, 1).otherwise(0)
    orphan = F.col("orphan_reason").isNotNull() & F.col("age_ms").isNotNull()
    return items.groupBy("source", "proposed", orphan.alias("orphan"), index.alias("bin")).count()


def _write_items_csv(items: DataFrame, out: Path) -> None:
    # Pulsar's Codec.decode is URLDecoder; a malformed escape keeps the stored name.
    decoded = items.select(
        "proposed",
        "source",
        "kind",
        "reason",
        "namespace",
        F.coalesce(F.try_url_decode("ml_name"), "ml_name").alias("managed_ledger"),
        F.coalesce(F.try_url_decode("cursor_name"), "cursor_name").alias("cursor"),
        F.coalesce(F.try_url_decode("schema_id"), "schema_id").alias("schema"),
        "ledger_id",
        "state",
        "bucket",
        "key",
        "uuid",
        "cluster_name",
        "size_bytes",
        (F.col("age_ms") / 1000).cast("long").alias("age_s"),
        "ml_name",
    )
    staging = out / "_items_csv"
    # Sorted by ranges, so every task sorts and writes its share (in one task, the sort and
    # the CSV encoding of every item ran on one core); the parts, in order, are the file.
    decoded.orderBy(*_item_order()).write.mode("overwrite").option("header", True).csv(str(staging))
    _concatenate_csv(sorted(staging.glob("part-*.csv")), out / ITEMS_CSV, decoded.columns)
    shutil.rmtree(staging)


def _concatenate_csv(parts: Sequence[Path], target: Path, columns: Sequence[str]) -> None:
    """One CSV file of the `parts` (each with its header line) in their order, one header."""
    with target.open("wb") as out:
        if not parts:
            out.write((",".join(columns) + "\n").encode())
        for index, part in enumerate(parts):
            with part.open("rb") as lines:
                if index:
                    lines.readline()
                shutil.copyfileobj(lines, out)


def age_edges_s(min_age_s: int) -> list[int]:
    return sorted({*AGE_EDGES_S, min_age_s})


#: A candidate's owner: the submit makes at least one call per owner.
OWNER_COLUMNS = ("component", "ml_name", "cursor_name", "schema_id")


def candidate_totals_and_plan(candidates: DataFrame) -> tuple[dict[str, int], dict[str, Any]]:
    """summary.json's `candidates` totals and `submit_plan`: candidates per (tier, component)
    and the number of owners, from one query (one Spark job)."""
    none_text, none_long = F.lit(None).cast("string"), F.lit(None).cast("long")
    groups = candidates.groupBy("ledger_type", "component").agg(
        F.count("*").alias("count"),
        F.sum("size_bytes").cast("long").alias("bytes"),
        none_long.alias("owners"),
    )
    owners = (
        candidates.select(*OWNER_COLUMNS)
        .distinct()
        .agg(
            none_text.alias("ledger_type"),
            none_text.alias("component"),
            none_long.alias("count"),
            none_long.alias("bytes"),
            F.count("*").alias("owners"),
        )
    )
    rows = groups.unionByName(owners).collect()
    by_component = sorted(
        (
            {
                "ledger_type": r["ledger_type"],
                "component": r["component"],
                "count": r["count"],
                "bytes": int(r["bytes"] or 0),
            }
            for r in rows
            if r["owners"] is None
        ),
        key=lambda r: (_nulls_first(r["ledger_type"]), _nulls_first(r["component"])),
    )
    totals = {
        "count": sum(r["count"] for r in by_component),
        "ledgers": sum(r["count"] for r in by_component if r["ledger_type"] == "LEDGER"),
        "objects": sum(r["count"] for r in by_component if r["ledger_type"] == "OFFLOAD_LEDGER"),
        "bytes": sum(r["bytes"] for r in by_component),
    }
    owner_count = next(r["owners"] for r in rows if r["owners"] is not None)
    return totals, {"by_component": by_component, "owners": owner_count}


def _nulls_first(value: str | None) -> tuple[bool, str]:
    """Spark's ascending order: nulls first, then strings (UTF-8 bytes order code points too)."""
    return (value is not None, value or "")
