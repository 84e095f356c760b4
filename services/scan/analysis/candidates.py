"""Deletion candidates, shaped like the PDLIs the marker will receive (one per ledger tier).

A BookKeeper candidate names the ledger, its component and owner, and the znode version the
analysis saw. An offload candidate groups the objects of one (bucket, ledger id, uuid): it is
a candidate only when every one of its objects is deletable (a young index object holds back
its old data object).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from services.scan.analysis.classify import DELETABLE_KINDS

CANDIDATE_COLUMNS = (
    "ledger_type",
    "ledger_id",
    "component",
    "ml_name",
    "cursor_name",
    "schema_id",
    "bucket",
    "uuid",
    "object_keys",
    "znode_version",
    "kind",
    "namespace",
    "size_bytes",
    "age_ms",
)


def ledger_candidates(ledger_findings: DataFrame) -> DataFrame:
    """LEDGER-tier candidates from the deletable ledger findings."""
    return deletable(ledger_findings).select(
        F.lit("LEDGER").alias("ledger_type"),
        "ledger_id",
        F.col("pdli_component").alias("component"),
        "ml_name",
        "cursor_name",
        "schema_id",
        F.lit(None).cast("string").alias("bucket"),
        F.lit(None).cast("string").alias("uuid"),
        F.lit(None).cast("array<string>").alias("object_keys"),
        "znode_version",
        "kind",
        "namespace",
        "size_bytes",
        "age_ms",
    )


def deletable(findings: DataFrame) -> DataFrame:
    """The deletable findings. Only a deletable kind is ever deletable: filtered by kind
    first, written findings (partitioned by kind) are read in those kinds' folders only."""
    return findings.filter(F.col("kind").isin(*DELETABLE_KINDS)).filter(F.col("deletable"))


def object_candidates(object_findings: DataFrame) -> DataFrame:
    """OFFLOAD_LEDGER-tier candidates: one per (bucket, ledger id, uuid), all objects deletable.

    Only uploads with a deletable object can qualify: every object of those uploads (and no
    other) is grouped. Grouping all objects, mostly referenced ones, gathered millions of
    key lists to keep a few. None of those uploads' objects is `referenced`: an object is
    referenced by its ledger id and uuid, which all the objects of an upload share, so an
    upload with a deletable object has no referenced one, and the referenced findings
    (most of them, partitioned apart) are not read."""
    upload = ["bucket", "ledger_id", "uuid"]
    parsed = object_findings.filter(
        (F.col("kind") != "referenced") & F.col("ledger_id").isNotNull() & F.col("uuid").isNotNull()
    )
    parsed = parsed.withColumn("uuid", F.lower("uuid"))
    proposed = deletable(parsed).select(*upload).distinct()
    grouped = (
        parsed.join(proposed, upload, "left_semi")
        .groupBy(*upload)
        .agg(
            F.min(F.col("deletable").cast("int")).alias("all_deletable"),
            F.array_sort(F.collect_list("key")).alias("object_keys"),
            F.max("ml_name").alias("ml_name"),
            F.max("namespace").alias("namespace"),
            F.sum("size_bytes").cast("long").alias("size_bytes"),
            F.min("age_ms").alias("age_ms"),
        )
    )
    return grouped.filter(F.col("all_deletable") == 1).select(
        F.lit("OFFLOAD_LEDGER").alias("ledger_type"),
        "ledger_id",
        F.lit("MANAGED_LEDGER").alias("component"),
        "ml_name",
        F.lit(None).cast("string").alias("cursor_name"),
        F.lit(None).cast("string").alias("schema_id"),
        "bucket",
        "uuid",
        "object_keys",
        F.lit(None).cast("long").alias("znode_version"),
        F.lit("offload_no_match").alias("kind"),
        "namespace",
        "size_bytes",
        "age_ms",
    )


def deletion_candidates(ledger_findings: DataFrame, object_findings: DataFrame) -> DataFrame:
    """Every candidate of both tiers, in CANDIDATE_COLUMNS order."""
    return ledger_candidates(ledger_findings).unionByName(object_candidates(object_findings))
