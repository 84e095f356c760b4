"""The report's section on a shared BookKeeper: ledgers and objects set apart because their
owner is another cluster's, their namespace does not exist here, or their namespace
replicates to a cluster that is not declared. None of them is ever proposed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.scan.report.format import human_bytes, plural
from services.scan.report.html_blocks import bullets, mark, para, section, table, text

Summary = Mapping[str, Any]
TITLE = "Shared BookKeeper: set apart, never proposed"
WHY = {
    "neighbour_owner": "its owner exists in declared cluster {cluster}, not here",
    "unknown_namespace": "its namespace has no policies here: another cluster's, or deleted",
    "replicated_undeclared": "its namespace replicates to {replicas}, not declared: that "
    "cluster's ledger of the same topic would look like ours",
}


def _why(row: Mapping[str, Any], replicated: Mapping[str, list[str]]) -> str:
    replicas = ", ".join(replicated.get(row["namespace"] or "", [])) or "another cluster"
    template = WHY.get(row["kind"], "never proposed")
    return template.format(cluster=row.get("cluster") or "?", replicas=replicas)


def shared_bookkeeper(summary: Summary) -> str:
    """Nothing for a summary written before sharing was analysed."""
    shared = summary.get("shared_bookkeeper")
    if shared is None:
        return ""
    declared = shared.get("declared") or []
    replicated = shared.get("replicated_undeclared") or {}
    facts = [
        "declared clusters sharing the ledgers root (their references read): "
        + (", ".join(f"<code>{text(c)}</code>" for c in declared) or "none"),
        f"namespaces with policies here: {int(shared.get('namespaces', 0)):,}"
        if shared.get("namespaces_listed")
        else "<span class='bad'>namespace policies not read</span>: no ledger could be "
        "told to be another cluster's",
    ]
    deleted = shared.get("deleted_namespaces") or []
    if deleted:
        facts.append(
            "named as deleted (<code>--deleted-namespace</code>): "
            + ", ".join(f"<code>{text(n)}</code>" for n in deleted)
        )
    rows = [
        (
            r["kind"],
            r.get("cluster") or "",
            r["namespace"],
            r["ledgers"],
            r["objects"],
            human_bytes(r["bytes"]),
            mark(_why(r, replicated), "no"),
        )
        for r in shared.get("held_apart") or []
    ]
    parts = [bullets(facts)]
    if rows:
        ledgers = sum(int(r[3]) for r in rows)
        objects = sum(int(r[4]) for r in rows)
        parts.append(
            para(
                f"{plural(ledgers, 'ledger')} and {plural(objects, 'object')} are set apart: "
                "they may be another Pulsar cluster's data on this BookKeeper. They are "
                "never proposed and not counted in the orphan share."
            )
        )
        headers = ("kind", "cluster", "namespace", "ledgers", "objects", "bytes", "why")
        parts.append(table(headers, rows, numeric=(3, 4, 5), cls="shared"))
    else:
        parts.append(para("Nothing was set apart."))
    return section("shared-bookkeeper", TITLE, *parts)
