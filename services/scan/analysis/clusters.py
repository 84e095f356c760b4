"""Which cluster the offloaded objects belong to, for a bucket shared by several clusters.

Objects naming another cluster (`pulsarclustername`) are `other_cluster`: excluded, never
proposed, and summed here per cluster for summary.json and the report. Pulsar-named objects
that name no cluster are summed too: written before Pulsar 2.10, or not read with HEAD
(`--no-head-objects`), in which case another cluster's objects are among them unseen.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from services.scan.report.sections import (
    ALLOW_SHORT_MIN_AGE,
    DELETED_NAMESPACE,
    NO_HEAD_OBJECTS,
)

#: The warning (summary.json `warnings`, the report's banner) for an extract that does not
#: say whether its objects were read with HEAD.
HEAD_UNRECORDED = (
    "the extract does not record whether offloaded objects were read with HEAD (it predates "
    "that record): if they were not, another cluster's objects could not be told apart"
)


def object_clusters(object_findings: DataFrame) -> dict[str, Any]:
    """`other_clusters` (objects, bytes, by_cluster) and `unattributed` (Pulsar-named objects
    naming no cluster: objects, bytes, deletable), from one small grouping."""
    foreign = F.col("kind") == "other_cluster"
    unnamed = F.col("ledger_id").isNotNull() & F.col("cluster_name").isNull()
    rows = (
        object_findings.filter(foreign | unnamed)
        .groupBy(foreign.alias("foreign"), "cluster_name")
        .agg(
            F.count("*").alias("objects"),
            F.sum("size_bytes").cast("long").alias("bytes"),
            F.sum(F.col("deletable").cast("int")).cast("long").alias("deletable"),
        )
        .collect()
    )
    by_cluster = sorted(
        (
            {"cluster_name": r["cluster_name"], "objects": r["objects"], "bytes": r["bytes"] or 0}
            for r in rows
            if r["foreign"]
        ),
        key=lambda r: (-r["objects"], r["cluster_name"]),
    )
    unattributed = [r for r in rows if not r["foreign"]]
    return {
        "other_clusters": {
            "objects": sum(r["objects"] for r in by_cluster),
            "bytes": sum(r["bytes"] for r in by_cluster),
            "by_cluster": by_cluster,
        },
        "unattributed_objects": {
            "objects": sum(int(r["objects"]) for r in unattributed),
            "bytes": sum(int(r["bytes"] or 0) for r in unattributed),
            "deletable": sum(int(r["deletable"] or 0) for r in unattributed),
        },
    }


def risky_options(
    *, below_floor: bool, objects_headed: bool | None, deleted_namespaces: bool = False
) -> list[str]:
    """The risky options the run was made with, as the banner names them."""
    options = [ALLOW_SHORT_MIN_AGE] if below_floor else []
    if objects_headed is False:
        options.append(NO_HEAD_OBJECTS)
    if deleted_namespaces:
        options.append(DELETED_NAMESPACE)
    return options


def warnings(objects_headed: bool | None) -> list[str]:
    """What the banner warns of beside the options (unknown is not negative)."""
    return [HEAD_UNRECORDED] if objects_headed is None else []
