"""summary.json's `shared_bookkeeper`: what was set apart as (maybe) another cluster's, and
the warnings about clusters that may share the BookKeeper without being declared."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from services.scan.analysis import sharing as S
from services.scan.preflight.sharing import replication_text
from services.scan.schema import Extract

NAMESPACES_UNREAD = (
    "the extract did not read namespace policies (it predates that listing): ledgers of "
    "another cluster sharing this BookKeeper cannot be told apart from this cluster's"
)


def undeclared_replication(namespaces: DataFrame, sharing: S.Sharing) -> dict[str, list[str]]:
    """`{namespace: clusters}` for each namespace replicating to an undeclared cluster."""
    info = S.namespace_info(namespaces, sharing)
    rows = info.filter(S.replicated_undeclared()).collect()
    return {r["owner_namespace"]: list(r["undeclared_replicas"]) for r in rows}


def _held(findings: DataFrame, source: str) -> DataFrame:
    return findings.filter(F.col("kind").isin(*S.HELD_KINDS)).select(
        "kind",
        F.coalesce("owner_namespace", "namespace").alias("namespace"),
        F.col("neighbour_cluster"),
        F.lit(source).alias("source"),
        "size_bytes",
    )


def held_apart(ledgers: DataFrame, objects: DataFrame) -> list[dict[str, Any]]:
    """One row per (kind, neighbour cluster, namespace): ledgers, objects and bytes."""
    rows = (
        _held(ledgers, "ledger")
        .unionByName(_held(objects, "object"))
        .groupBy("kind", "neighbour_cluster", "namespace")
        .agg(
            F.sum((F.col("source") == "ledger").cast("long")).alias("ledgers"),
            F.sum((F.col("source") == "object").cast("long")).alias("objects"),
            F.sum("size_bytes").cast("long").alias("bytes"),
        )
        .collect()
    )
    out = [
        {
            "kind": r["kind"],
            "cluster": r["neighbour_cluster"],
            "namespace": r["namespace"],
            "ledgers": int(r["ledgers"] or 0),
            "objects": int(r["objects"] or 0),
            "bytes": int(r["bytes"] or 0),
        }
        for r in rows
    ]
    return sorted(out, key=lambda r: (r["kind"], r["cluster"] or "", r["namespace"] or ""))


def summarize(
    extract: Extract, ledgers: DataFrame, objects: DataFrame, sharing: S.Sharing
) -> dict[str, Any]:
    replicated = undeclared_replication(extract.namespaces, sharing)
    warnings = []
    if not sharing.namespaces_listed:
        warnings.append(NAMESPACES_UNREAD)
    warning = replication_text(replicated)
    if warning is not None:
        warnings.append(warning)
    return {
        "shared_bookkeeper": {
            "declared": list(sharing.declared),
            "namespaces_listed": sharing.namespaces_listed,
            "namespaces": extract.namespaces.count(),
            "deleted_namespaces": list(sharing.deleted_namespaces),
            "replicated_undeclared": replicated,
            "held_apart": held_apart(ledgers, objects),
            "warnings": warnings,
        }
    }
