"""Reports beside the orphans: dormant topics, inactive cursors, reclaimable bytes, counts.

Pure DataFrame → DataFrame functions; every result is small (grouped) except the topic and
cursor lists, which are written, not collected.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from services.scan.analysis.classify import OPEN_STATES
from services.scan.analysis.names import UNKNOWN_NAMESPACE, namespace_of_ml


def dormant_topics(
    managed_ledgers: DataFrame,
    ml_ledgers: DataFrame,
    bk_ledgers: DataFrame,
    *,
    now_ms: int,
    dormant_age_ms: int,
) -> DataFrame:
    """Topics that look never loaded, so their retention never runs (a heuristic).

    A broker that loads a topic opens a fresh ledger and appends it to the list with
    timestamp 0, and that BookKeeper ledger is OPEN (or IN_RECOVERY after a crash). So a
    topic whose last listed ledger is closed (timestamp > 0, or the ledger is not OPEN in
    BookKeeper) or whose list is empty, and whose ML znode has not changed for
    `dormant_age_ms`, has most likely not been loaded since: its retention and trimming do
    not apply and its ledgers stay until the topic is loaded or deleted.
    """
    per_ml = ml_ledgers.groupBy("ml_name").agg(
        F.count("*").alias("ledgers"),
        F.sum(F.coalesce("size", F.lit(0))).alias("size_bytes"),
        F.max_by("ledger_id", "position").alias("last_ledger_id"),
        F.max_by("timestamp_ms", "position").alias("last_timestamp_ms"),
    )
    # Only open ledgers matter here, and they are few: join those, not all of BookKeeper.
    states = bk_ledgers.filter(F.col("state").isin(*OPEN_STATES)).select(
        F.col("ledger_id").alias("last_ledger_id"), "state"
    )
    open_last = F.coalesce(F.col("last_timestamp_ms"), F.lit(0)) == 0
    open_in_bk = F.col("state").isNotNull()
    idle_ms = F.lit(now_ms) - F.col("znode_mtime_ms")
    return (
        managed_ledgers.select("ml_name", "znode_mtime_ms")
        .join(per_ml, "ml_name", "left")
        .join(states, "last_ledger_id", "left")
        .filter(~(F.col("last_ledger_id").isNotNull() & open_last & open_in_bk))
        .filter(idle_ms >= dormant_age_ms)
        .select(
            "ml_name",
            F.coalesce(namespace_of_ml(F.col("ml_name")), F.lit(UNKNOWN_NAMESPACE)).alias(
                "namespace"
            ),
            F.coalesce("ledgers", F.lit(0)).alias("ledgers"),
            F.coalesce("size_bytes", F.lit(0)).alias("size_bytes"),
            "last_ledger_id",
            open_in_bk.alias("last_ledger_open"),
            F.col("znode_mtime_ms").alias("last_modified_ms"),
            idle_ms.alias("idle_ms"),
        )
    )


def inactive_cursors(cursors: DataFrame, *, now_ms: int, inactive_age_ms: int) -> DataFrame:
    """Cursors whose lastActive is older than `inactive_age_ms` (they hold back retention)."""
    idle_ms = F.lit(now_ms) - F.col("last_active_ms")
    return cursors.filter(
        F.col("last_active_ms").isNotNull() & (idle_ms >= inactive_age_ms)
    ).select(
        "ml_name",
        "cursor_name",
        F.coalesce(namespace_of_ml(F.col("ml_name")), F.lit(UNKNOWN_NAMESPACE)).alias("namespace"),
        "last_active_ms",
        idle_ms.alias("idle_ms"),
        "mark_delete_ledger_id",
        "mark_delete_entry_id",
    )


def reclaimable_by_namespace(candidates: DataFrame) -> DataFrame:
    """Bytes and counts of the deletion candidates per namespace, per tier.

    Computed from the candidates before the safety gate, so a refused run still shows what
    a clean one would reclaim.
    """
    ledger = F.col("ledger_type") == "LEDGER"
    size = F.coalesce("size_bytes", F.lit(0))
    return (
        candidates.groupBy("namespace")
        .agg(
            F.sum(F.when(ledger, 1).otherwise(0)).cast("long").alias("ledgers"),
            F.sum(F.when(ledger, size).otherwise(0)).cast("long").alias("ledger_bytes"),
            F.sum(F.when(ledger, 0).otherwise(1)).cast("long").alias("offloads"),
            F.sum(F.when(ledger, 0).otherwise(size)).cast("long").alias("offload_bytes"),
        )
        .withColumn("total_bytes", F.col("ledger_bytes") + F.col("offload_bytes"))
    )


def counts_by_kind(ledger_findings: DataFrame, object_findings: DataFrame) -> DataFrame:
    """(source, kind, orphan_reason, count, bytes) for ledgers and objects."""

    def grouped(df: DataFrame, source: str) -> DataFrame:
        return (
            df.groupBy("kind", "orphan_reason")
            .agg(F.count("*").alias("count"), F.sum("size_bytes").cast("long").alias("bytes"))
            .withColumn("source", F.lit(source))
        )

    return grouped(ledger_findings, "ledger").unionByName(grouped(object_findings, "object"))
