"""When the reconciler refuses to propose any deletion.

An incomplete or implausible scan makes referenced ledgers look like orphans (a failed ML
listing makes *every* ledger of its subtree unreferenced), so the run proposes nothing when:
- an extract task failed or was truncated, or a kind of task never ran successfully;
- a reference znode (ML, cursor, schema locator) could not be decoded;
- the orphan share of Pulsar-owned ledgers, or of Pulsar-named objects, exceeds the limit
  (a scan bug is likelier than a mass of orphans);
- the extract was taken of another cluster than the configured one;
- objects that this cluster's managed ledgers list (same ledger id *and* uuid) name another
  cluster: then `--cluster` is likely not the name the brokers write, and every object of
  this cluster would be excluded as "another cluster's".
Objects that merely name another cluster are not a reason: in a bucket shared by several
clusters they are excluded (`other_cluster`, never a candidate) and reported.
The findings are still reported; only the deletion candidates are withheld.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.sharing import HELD_KINDS, ours
from services.scan.schema import TABLE_KINDS, Extract

#: How many offending tasks or cluster names a reason lists at most.
MAX_LISTED = 5
#: Kinds left out of the orphan shares (base and orphans): not this cluster's Pulsar data,
#: or possibly another cluster's (set apart on a shared BookKeeper, never proposed).
NOT_COUNTED = ("unknown_ownership", "unreadable", "other_cluster", *HELD_KINDS)


@dataclass(frozen=True)
class SafetyVerdict:
    """The reasons to refuse (none: deletions may be proposed) and the measured shares."""

    reasons: tuple[str, ...]
    ledger_orphan_share: float
    object_orphan_share: float

    @property
    def refused(self) -> bool:
        return bool(self.reasons)


def manifest_problems(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Failed or truncated tasks, and kinds of task with no successful run at all (from the
    manifest's rows, collected once by the caller)."""
    reasons = []
    bad = [row for row in rows if row["status"] != "ok"]
    for row in bad[:MAX_LISTED]:
        reasons.append(
            f"extract task {row['task_id']} ({row['kind']} {row['scope']}) "
            f"{row['status']}: {row['error'] or 'no error recorded'}"
        )
    if len(bad) > MAX_LISTED:
        reasons.append(f"... and {len(bad) - MAX_LISTED} more failed or truncated tasks")
    ran = {row["kind"] for row in rows if row["status"] == "ok"}
    reasons.extend(
        f"no successful extract task of kind {kind!r}: its absence would read as 'not referenced'"
        for kind in TABLE_KINDS
        if kind not in ran
    )
    return reasons


def decode_problems(extract: Extract) -> list[str]:
    """Reference znodes that could not be decoded: what they reference is unknown."""
    tables = {
        "managed_ledgers": extract.managed_ledgers,
        "cursors": extract.cursors,
        "schemas": extract.schemas,
        # Where such a namespace replicates is unknown.
        "namespace policies": extract.namespaces,
    }
    # One query (one Spark job) counts all four tables.
    counted = [
        frame.filter(F.col("decode_error").isNotNull()).agg(
            F.lit(name).alias("table"), F.count("*").alias("count")
        )
        for name, frame in tables.items()
    ]
    counts = {
        row["table"]: row["count"] for row in reduce(DataFrame.unionByName, counted).collect()
    }
    return [f"{counts[name]} {name} znodes could not be decoded" for name in tables if counts[name]]


def _share(rows: Sequence[Any], source: str) -> float:
    owned = sum(r["count"] for r in rows if r["source"] == source and r["kind"] not in NOT_COUNTED)
    orphans = sum(
        r["count"]
        for r in rows
        if r["source"] == source and r["orphan_reason"] and r["kind"] not in NOT_COUNTED
    )
    return orphans / owned if owned else 0.0


def share_problems(
    kind_counts: DataFrame | Sequence[Mapping[str, Any]], max_share: float
) -> tuple[list[str], float, float]:
    """Orphan shares of Pulsar-owned ledgers and objects, and a reason for each above the limit
    (from the counts by kind, or their rows already collected)."""
    rows = kind_counts.collect() if isinstance(kind_counts, DataFrame) else kind_counts
    ledger_share, object_share = _share(rows, "ledger"), _share(rows, "object")
    reasons = [
        f"{share:.1%} of Pulsar-owned {what} look orphaned, above the {max_share:.1%} limit: "
        "a scan problem is likelier than that many orphans"
        for what, share in (("ledgers", ledger_share), ("offloaded objects", object_share))
        if share > max_share
    ]
    return reasons, ledger_share, object_share


def cluster_problems(
    extract: Extract, cluster: str, scan_run: Sequence[Mapping[str, Any]]
) -> list[str]:
    """The extract names another cluster, or objects of this cluster name another one
    (`scan_run`: that table's rows, collected once by the caller)."""
    reasons = []
    scanned = {row["cluster_name"] for row in scan_run}
    if scanned != {cluster}:
        reasons.append(
            f"the extract was taken of cluster(s) {sorted(map(str, scanned))}, not {cluster!r}"
        )
    # Ledger ids are allocated per cluster, so another cluster's object with one of our ids is
    # expected in a shared bucket; the offload uuid is random per upload, so an object whose
    # (ledger id, uuid) one of our lists names is ours, whatever cluster it says.
    # Our lists only: a declared neighbour's topics list its own objects, naming it.
    listed = (
        ours(extract.ml_ledgers)
        .filter(F.col("offload_uuid").isNotNull())
        .select("ledger_id", F.lower("offload_uuid").alias("listed_uuid"))
    )
    ours_named_other = (
        extract.offload_objects.filter(
            F.col("cluster_name").isNotNull() & (F.col("cluster_name") != cluster)
        )
        .join(
            listed,
            (extract.offload_objects["ledger_id"] == listed["ledger_id"])
            & (F.lower(extract.offload_objects["uuid"]) == listed["listed_uuid"]),
            "left_semi",
        )
        .groupBy("cluster_name")
        .count()
        .orderBy(F.col("count").desc(), "cluster_name")
        .limit(MAX_LISTED)
        .collect()
    )
    if ours_named_other:
        names = ", ".join(
            f"{row['cluster_name']!r} ({row['count']} objects)" for row in ours_named_other
        )
        reasons.append(
            f"offloaded objects that this cluster's topics list (same ledger id and uuid) name "
            f"another cluster than {cluster!r}: {names}; --cluster is likely not the name "
            "the brokers write (pulsarclustername)"
        )
    return reasons


def check_safety(
    extract: Extract,
    kind_counts: Sequence[Mapping[str, Any]],
    config: AnalyzeConfig,
    *,
    scan_run: Sequence[Mapping[str, Any]],
    manifest: Sequence[Mapping[str, Any]],
) -> SafetyVerdict:
    """Every refusal reason that applies (all checks run, so the report lists them all);
    `scan_run` and `manifest` are those tables' rows, collected once by the caller."""
    reasons = manifest_problems(manifest)
    reasons += decode_problems(extract)
    share_reasons, ledger_share, object_share = share_problems(kind_counts, config.max_orphan_share)
    reasons += share_reasons
    reasons += cluster_problems(extract, config.cluster, scan_run)
    return SafetyVerdict(tuple(reasons), ledger_share, object_share)


def gate_candidates(candidates: DataFrame, verdict: SafetyVerdict) -> DataFrame:
    """The candidates when the verdict allows deletions; none (same schema) when refused."""
    return candidates.limit(0) if verdict.refused else candidates
