"""Report sections about the scan itself: coverage, the item list, bytes, ages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.scan.report import svg
from services.scan.report.clusters import cluster_unknown
from services.scan.report.format import (
    CLUSTER_UNKNOWN,
    decode_name,
    human_bytes,
    human_count,
    human_duration,
    kind_reason,
    plural,
    topic_of_ml,
    zxid_text,
)
from services.scan.report.html_blocks import Raw, bullets, mark, para, section, table, text

Summary = Mapping[str, Any]
#: Namespaces charted (the table beside it and summary.json hold more).
TOP_NAMESPACES = 20
STATUSES = ("ok", "failed", "truncated")
#: The kinds a run proposes (`services.scan.analysis.classify.DELETABLE_KINDS`; the report
#: reads summaries without Spark, so it keeps its own copy, checked equal by a test).
PROPOSABLE = (
    "topic_gone",
    "not_in_list",
    "cursor_moved_on",
    "schema_not_in_locator",
    "bk_copy_after_offload",
    "offload_no_match",
    "compacted_unreferenced",
    "bucket_unreferenced",
)


def min_age_s(summary: Summary) -> float:
    config = summary.get("config", {})
    if "min_age_s" in config:
        return float(config["min_age_s"])
    return float(config.get("min_age_days", 0.0)) * 86_400


def coverage(summary: Summary) -> str:
    cov = summary.get("coverage")
    if not cov:
        return section("coverage", "Scan coverage", para("This run recorded no coverage."))
    by_status = {s: sum(int(k.get(s, 0)) for k in cov["by_kind"]) for s in STATUSES}
    for listing in cov.get("listings", []):
        by_status[listing["status"]] = by_status.get(listing["status"], 0) + 1
    scan = summary.get("scan", {})
    took = None
    if scan.get("ended_ms") and scan.get("started_ms"):
        took = (scan["ended_ms"] - scan["started_ms"]) / 1000
    failed, truncated = (_flag(by_status[s], s) for s in ("failed", "truncated"))
    head = para(
        f"{human_count(cov['tasks'])} extract tasks: {by_status['ok']} ok, {failed}, "
        f"{truncated}. {_store_point(cov)}; the extract took {text(human_duration(took))}."
    )
    kinds = table(
        ("table", "tasks ok", "failed", "truncated", "rows read"),
        (
            (k["kind"], k.get("ok", 0), k.get("failed", 0), k.get("truncated", 0), k["rows"])
            for k in cov["by_kind"]
        ),
        numeric=(1, 2, 3, 4),
    )
    listings = (
        para("No listing was recorded.")
        if not cov.get("listings")
        else table(
            ("listing", "under", "units found", "status", "error"),
            (
                (row["kind"], row["scope"], row["rows"], _status(row["status"]), row.get("error"))
                for row in cov.get("listings", [])
            ),
            numeric=(2,),
        )
    )
    return section(
        "coverage",
        "Scan coverage",
        head,
        kinds,
        "<h3>Listings (what the tasks were made of)</h3>",
        listings,
        "<h3>Skipped, and why</h3>",
        bullets(_skipped(summary, cov)),
        _problems(cov),
        _all_tasks(cov),
    )


def _store_point(cov: Mapping[str, Any]) -> str:
    """How far the metadata store was read: its zxid, or on a store without one (Oxia) that
    only each record's own version and time were recorded."""
    if cov.get("zxid_max") is None and cov.get("zxid_listing") is None:
        return (
            "No transaction id was recorded (Oxia has none; on ZooKeeper, no read finished): "
            "each record's version and modification time were"
        )
    return (
        f"ZooKeeper read up to zxid {text(zxid_text(cov.get('zxid_max')))} (the listing saw "
        f"{text(zxid_text(cov.get('zxid_listing')))})"
    )


def _flag(count: int, what: str) -> str:
    return f"<span class='bad'>{count} {what}</span>" if count else f"0 {what}"


def _status(status: str) -> Raw:
    return mark(status, "yes" if status == "ok" else "bad")


def _skipped(summary: Summary, cov: Mapping[str, Any]) -> list[str]:
    out = []
    source = cov.get("object_source", "")
    if source == "none":
        out.append(
            "<span class='bad'>Offloaded objects were not scanned</span>: no bucket was given "
            "(<code>--bucket</code>), so orphaned offloads cannot be found."
        )
    elif source:
        buckets = ", ".join(cov.get("buckets", []))
        out.append(f"Offloaded objects read from {text(source)} of {text(buckets)}.")
    count = cov.get("problem_count", 0)
    if count:
        out.append(
            f"<span class='bad'>Failed or truncated extract tasks: {human_count(count)}</span>; "
            "what they should have read is unknown (listed below)."
        )
    # A refused scan's findings are not to be trusted (an unread subtree makes referenced
    # ledgers look orphaned): they are not summarised.
    for row in [] if summary.get("refused") else _not_proposed(summary):
        out.append(
            f"{text(plural(row['count'], row['source']))} "
            f"({text(human_bytes(row['bytes']))}) <code>{text(row['kind'])}</code>: "
            f"{text(kind_reason(row['kind']))}."
        )
    return out or ["Nothing: every listed unit was read."]


def _not_proposed(summary: Summary) -> list[dict[str, Any]]:
    """Findings that are neither referenced nor proposable, summed per (source, kind)."""
    sums: dict[tuple[str, str], list[int]] = {}
    for row in summary.get("counts", []):
        if row["kind"] in PROPOSABLE or row["kind"] == "referenced":
            continue
        entry = sums.setdefault((row["source"], row["kind"]), [0, 0])
        entry[0] += int(row["count"])
        entry[1] += int(row.get("bytes") or 0)
    return [
        {"source": s, "kind": k, "count": c, "bytes": b} for (s, k), (c, b) in sorted(sums.items())
    ]


def _problems(cov: Mapping[str, Any]) -> str:
    problems = cov.get("problems", [])
    if not problems:
        return ""
    shown = table(
        ("task", "status", "error"),
        ((p["task_id"], _status(p["status"]), p.get("error")) for p in problems),
    )
    more = cov.get("problem_count", len(problems)) - len(problems)
    tail = para(f"… and {more} more (every task: <a href='{cov['csv']}'>{cov['csv']}</a>).")
    return "<h3>Failed or truncated tasks</h3>" + shown + (tail if more > 0 else "")


def _all_tasks(cov: Mapping[str, Any]) -> str:
    link = f"<a href='{text(cov.get('csv', 'tasks.csv'))}'>{text(cov.get('csv', 'tasks.csv'))}</a>"
    tasks = cov.get("task_list")
    if not tasks:
        return para(f"Every task, with its rows, times and zxid: {link}.")
    listed = table(
        ("task", "status", "rows", "took", "zxid"),
        (
            (
                t["task_id"],
                _status(t["status"]),
                t["rows"],
                human_duration((t["ended_ms"] - t["started_ms"]) / 1000)
                if t.get("ended_ms") and t.get("started_ms")
                else "",
                zxid_text(t.get("zxid")) if t.get("zxid") is not None else "",
            )
            for t in tasks
        ),
        numeric=(2,),
    )
    return (
        f"<details><summary>Every extract task ({len(tasks)}; also in {link})</summary>"
        f"{listed}</details>"
    )


def items(summary: Summary) -> str:
    listed = summary.get("items")
    if not listed:
        return section("candidates", "Candidates and other findings", para("Not recorded."))
    window = min_age_s(summary)
    unknown = cluster_unknown(summary)
    shown = listed.get("shown", [])
    csv = text(listed.get("csv", "items.csv"))
    intro = para(
        f"{plural(listed['proposed'], 'item')} proposed for deletion, out of "
        f"{plural(listed['total'], 'finding')} that are not referenced. The "
        f"{len(shown)} shown here are the proposed ones first, largest first; every one is in "
        f"<a href='{csv}'>{csv}</a>."
    )
    rows = (
        (
            mark("yes", "yes") if item["proposed"] else mark("no", "no"),
            _what(item),
            _owner(item),
            item.get("namespace"),
            item.get("kind"),
            _reason(item, window, cluster_unknown=unknown),
            human_bytes(item.get("size_bytes") or 0),
            human_duration(item["age_ms"] / 1000) if item.get("age_ms") is not None else "unknown",
        )
        for item in shown
    )
    return section(
        "candidates",
        "Candidates and other findings",
        intro,
        table(
            ("deletable", "item", "owner", "namespace", "kind", "reason", "size", "age"),
            rows,
            numeric=(6, 7),
            cls="items",
        ),
    )


def _what(item: Mapping[str, Any]) -> str:
    if item.get("source") == "object":
        # S3 keys are stored as written (not URL-encoded): shown as they are.
        return f"object {item.get('bucket')}/{item.get('key')}"
    return f"ledger {item.get('ledger_id')}"


def _owner(item: Mapping[str, Any]) -> str:
    if item.get("schema_id"):
        return f"schema of {decode_name(item['schema_id'])}"
    topic = topic_of_ml(item.get("ml_name"))
    if item.get("cursor_name"):
        return f"{topic} subscription {decode_name(item['cursor_name'])}"
    return topic


def _reason(item: Mapping[str, Any], window_s: float, *, cluster_unknown: bool) -> str:
    reason = str(item.get("reason") or kind_reason(item.get("kind"), item.get("orphan_reason")))
    pulsar_object = item.get("source") == "object" and item.get("ledger_id") is not None
    if cluster_unknown and pulsar_object and not item.get("cluster_name"):
        reason += f"; {CLUSTER_UNKNOWN}"
    if item.get("kind") in ("too_young", "in_use_open") and item.get("age_ms") is not None:
        age = human_duration(item["age_ms"] / 1000)
        reason += f"; age {age}, window {human_duration(window_s)}"
    return reason


def kinds(summary: Summary) -> str:
    totals: dict[tuple[str, str], list[int]] = {}
    for row in summary.get("counts", []):
        entry = totals.setdefault((row["source"], row["kind"]), [0, 0])
        entry[0] += int(row["count"])
        entry[1] += int(row.get("bytes") or 0)
    shown = [(f"{s}: {k}", (float(b),)) for (s, k), (c, b) in sorted(totals.items())]
    chart = svg.hbar_chart(
        "Bytes by kind (referenced data left out: it would dwarf the rest)",
        [(label, v) for label, v in shown if not label.endswith(": referenced")],
        [svg.Series("bytes", "#5a8f5a")],
        in_bytes=True,
    )
    rows = (
        (s, k, c, human_bytes(b), "yes" if k in PROPOSABLE else "no")
        for (s, k), (c, b) in sorted(totals.items())
    )
    return section(
        "kinds",
        "Bytes by kind",
        chart,
        table(("source", "kind", "count", "bytes", "proposable"), rows, numeric=(2, 3)),
    )


def namespaces(summary: Summary) -> str:
    top = sorted(
        summary.get("reclaimable_by_namespace_top", []),
        key=lambda r: r["total_bytes"],
        reverse=True,
    )
    if not top:
        return section("namespaces", "Reclaimable bytes by namespace", para("Nothing."))
    chart = svg.hbar_chart(
        f"Reclaimable bytes per namespace (top {min(len(top), TOP_NAMESPACES)})",
        [
            (str(r["namespace"]), (float(r["ledger_bytes"]), float(r["offload_bytes"])))
            for r in top[:TOP_NAMESPACES]
        ],
        [svg.Series("BookKeeper ledgers", svg.BLUE), svg.Series("offloaded objects", svg.ORANGE)],
        in_bytes=True,
    )
    rows = (
        (
            r["namespace"],
            r["ledgers"],
            human_bytes(r["ledger_bytes"]),
            r["offloads"],
            human_bytes(r["offload_bytes"]),
            human_bytes(r["total_bytes"]),
        )
        for r in top
    )
    return section(
        "namespaces",
        "Reclaimable bytes by namespace",
        chart,
        table(
            ("namespace", "ledgers", "ledger bytes", "offloads", "offload bytes", "total"),
            rows,
            numeric=(1, 2, 3, 4, 5),
        ),
    )


def ages(summary: Summary) -> str:
    hist = summary.get("age_histogram")
    if not hist or not hist.get("edges_s"):
        return section("ages", "Orphan ages", para("Not recorded."))
    edges: Sequence[float] = hist["edges_s"]
    window = min_age_s(summary)
    marker = edges.index(window) if window in edges else None
    counts = {(b["source"], int(b["bin"])): int(b["count"]) for b in hist.get("bins", [])}
    used = [i for (_, i) in counts] + ([marker] if marker is not None else [])
    shown = range(max(used, default=0) + 1)
    labels = [_bin_label(edges, i) for i in shown]
    values = [[float(counts.get((source, i), 0)) for i in shown] for source in ("ledger", "object")]
    chart = svg.vbar_chart(
        "Orphans by age (too-young ones included)",
        labels,
        values,
        [svg.Series("ledgers", svg.BLUE), svg.Series("objects", svg.ORANGE)],
        marker_at=marker,
        marker_label=f"age window {human_duration(window)}",
        y_label="orphans",
    )
    return section(
        "ages",
        "Orphan ages",
        chart,
        para(
            "Each bar counts the orphans whose age falls in its range (lower bound included). "
            "Left of the dashed line they are younger than the age window: never proposed.",
            "meta",
        ),
    )


def _bin_label(edges: Sequence[float], i: int) -> str:
    if i + 1 < len(edges):
        return f"{_edge(edges[i])}–{_edge(edges[i + 1])}"
    return f"≥ {_edge(edges[i])}"


def _edge(seconds: float) -> str:
    return "0" if seconds == 0 else human_duration(seconds)


def also(summary: Summary) -> str:
    return section(
        "also",
        "Also reported",
        bullets(
            [
                "Dormant topics (they look never loaded, so their retention cannot apply): "
                f"{human_count(summary.get('dormant_topics', 0))} in <code>dormant_topics/</code>",
                "Inactive cursors (they hold back retention): "
                f"{human_count(summary.get('inactive_cursors', 0))} in "
                "<code>inactive_cursors/</code>",
            ]
        ),
    )
