"""The report's section on other clusters' objects in a shared bucket (excluded, never
proposed) and on Pulsar-named objects whose cluster is not known."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.scan.report.format import OTHER_CLUSTER_PREFIX, human_bytes, plural
from services.scan.report.html_blocks import mark, para, section, table, text

Summary = Mapping[str, Any]
TITLE = "Other clusters' objects (excluded)"


def cluster_unknown(summary: Summary) -> bool:
    """True when the objects' cluster names were not read (`--no-head-objects`) or the
    extract does not say (a summary without the record is an older run: not flagged)."""
    scan = summary.get("scan", {})
    return "objects_headed" in scan and scan["objects_headed"] is not True


def other_clusters(summary: Summary) -> str:
    """One row per other cluster naming its objects, then the objects of unknown cluster;
    nothing for a summary written before these were recorded."""
    foreign = summary.get("other_clusters")
    if foreign is None:
        return ""
    cluster = summary.get("config", {}).get("cluster")
    parts = []
    rows = [
        (
            r["cluster_name"],
            r["objects"],
            human_bytes(r["bytes"]),
            mark(f"{OTHER_CLUSTER_PREFIX} {r['cluster_name']}", "no"),
        )
        for r in foreign.get("by_cluster", [])
    ]
    if rows:
        parts.append(
            para(
                f"{plural(foreign['objects'], 'object')} ({human_bytes(foreign['bytes'])}) in "
                f"the scanned buckets name another Pulsar cluster than <b>{text(cluster)}</b> "
                "(their <code>pulsarclustername</code>): the bucket is shared. They are never "
                "proposed and not counted in the orphan share."
            )
        )
        parts.append(
            table(("cluster", "objects", "bytes", "status"), rows, numeric=(1, 2), cls="clusters")
        )
    elif cluster_unknown(summary):
        parts.append(
            para(
                "The objects' cluster names were not read: which belong to another "
                "cluster is unknown."
            )
        )
    else:
        parts.append(para(f"No scanned object names another cluster than {text(cluster)}."))
    parts.append(_unattributed(summary))
    return section("other-clusters", TITLE, *parts)


def _unattributed(summary: Summary) -> str:
    unknown = summary.get("unattributed_objects") or {}
    count = int(unknown.get("objects", 0))
    if not count:
        return ""
    size = human_bytes(unknown.get("bytes", 0))
    deletable = int(unknown.get("deletable", 0))
    if cluster_unknown(summary):
        return para(
            f"<span class='bad'>{plural(count, 'Pulsar-named object')} ({size}) of unknown "
            "cluster</span>: the objects were not read with HEAD, so another cluster's "
            f"objects cannot be told apart among them; {deletable:,} of them deletable "
            "(proposed unless the run refused).",
            "unattributed",
        )
    return para(
        f"{plural(count, 'Pulsar-named object')} ({size}) name no cluster: written before "
        "Pulsar 2.10 (no <code>pulsarclustername</code>).",
        "unattributed",
    )
