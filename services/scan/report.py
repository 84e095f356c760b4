"""The human report (HTML with PNG plots beside it) and the JSON summary.

Everything here takes small, already-collected data (lists of dicts), so it needs no Spark.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt

PLOTS_DIR = "plots"
PLOT_NAMESPACES = "reclaimable_by_namespace.png"
PLOT_AGES = "orphan_age_histogram.png"
PLOT_KINDS = "counts_by_kind.png"
#: The plot of namespaces shows the largest ones only.
TOP_NAMESPACES = 20

Rows = Sequence[Mapping[str, Any]]


def human_bytes(value: float) -> str:
    """1536 → '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def write_summary(out_dir: Path, summary: Mapping[str, Any]) -> Path:
    path = out_dir / "summary.json"
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    return path


def plot_reclaimable(rows: Rows, path: Path) -> None:
    """Horizontal bars of reclaimable bytes per namespace (BookKeeper and offload stacked)."""
    top = sorted(rows, key=lambda r: r["total_bytes"], reverse=True)[:TOP_NAMESPACES][::-1]
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.4 * len(top) + 1.2)))
    names = [str(r["namespace"]) for r in top]
    gib = 1024**3
    bk = [r["ledger_bytes"] / gib for r in top]
    off = [r["offload_bytes"] / gib for r in top]
    ax.barh(names, bk, label="BookKeeper ledgers", color="#3b6ea8")
    ax.barh(names, off, left=bk, label="offloaded objects", color="#e39c37")
    ax.set_xlabel("reclaimable GiB")
    ax.set_title(f"Reclaimable bytes per namespace (top {len(top)})")
    if not top:
        ax.text(0.5, 0.5, "nothing reclaimable", ha="center", va="center", transform=ax.transAxes)
    ax.legend(loc="lower right")
    _save(fig, path)


def plot_age_histogram(rows: Rows, path: Path, min_age_days: float) -> None:
    """Orphans per age in days (ledgers and objects), with the age window marked."""
    fig, ax = plt.subplots(figsize=(9, 4))
    for source, color, shift in (("ledger", "#3b6ea8", -0.2), ("object", "#e39c37", 0.2)):
        mine = sorted((r["age_days"], r["count"]) for r in rows if r["source"] == source)
        if mine:
            days, counts = zip(*mine, strict=True)
            ax.bar([d + shift for d in days], counts, width=0.4, label=f"{source}s", color=color)
    # Bin d holds ages in [d, d+1) days and is centred on d: the window ends at its left edge.
    ax.axvline(min_age_days - 0.5, color="#b03030", linestyle="--", label="age window")
    ax.set_xlabel("age (days; the last bin holds everything older)")
    ax.set_ylabel("orphans")
    ax.set_title("Orphan age histogram")
    ax.legend()
    _save(fig, path)


def plot_counts_by_kind(rows: Rows, path: Path) -> None:
    """Bars of findings per kind, ledgers and objects apart, on a log scale."""
    labels = [f"{r['source']}: {r['kind']}" for r in rows]
    counts = [r["count"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, max(2.5, 0.4 * len(rows) + 1.2)))
    ax.barh(labels[::-1], counts[::-1], color="#5a8f5a")
    if counts:
        ax.set_xscale("log")
    ax.set_xlabel("findings (log scale)")
    ax.set_title("Findings by kind")
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def kind_totals(counts: Rows) -> list[dict[str, Any]]:
    """Sum (source, kind) over orphan reasons, sorted for display."""
    totals: dict[tuple[str, str], list[int]] = {}
    for row in counts:
        entry = totals.setdefault((row["source"], row["kind"]), [0, 0])
        entry[0] += row["count"]
        entry[1] += row["bytes"] or 0
    return [
        {"source": s, "kind": k, "count": c, "bytes": b}
        for (s, k), (c, b) in sorted(totals.items())
    ]


def write_html_report(
    out_dir: Path,
    summary: Mapping[str, Any],
    *,
    counts: Rows,
    reclaimable: Rows,
    age_histogram: Rows,
) -> Path:
    """Write the plots under `plots/` and `report.html` referencing them."""
    plots = out_dir / PLOTS_DIR
    plots.mkdir(parents=True, exist_ok=True)
    totals = kind_totals(counts)
    plot_reclaimable(reclaimable, plots / PLOT_NAMESPACES)
    plot_age_histogram(age_histogram, plots / PLOT_AGES, summary["config"]["min_age_days"])
    plot_counts_by_kind(totals, plots / PLOT_KINDS)
    path = out_dir / "report.html"
    path.write_text(_html(summary, totals, reclaimable))
    return path


def _table(rows: Rows, columns: Sequence[str], byte_columns: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(human_bytes(r[c]) if c in byte_columns else str(r[c]))}</td>"
            for c in columns
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _html(summary: Mapping[str, Any], totals: Rows, reclaimable: Rows) -> str:
    esc = html.escape
    if summary["refused"]:
        verdict = "<p class='refused'><b>No deletion proposed.</b> The run refused because:</p>"
        verdict += "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in summary["refusal_reasons"])
        verdict += "</ul>"
    else:
        verdict = (
            f"<p class='ok'>{summary['candidates']['count']} deletion candidates "
            f"({esc(human_bytes(summary['candidates']['bytes']))}); dry run, nothing submitted.</p>"
        )
    top = sorted(reclaimable, key=lambda r: r["total_bytes"], reverse=True)[:TOP_NAMESPACES]
    scan = summary["scan"]
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>Tombstone reconciler report</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px}}
.refused{{color:#b03030}} .ok{{color:#2a7a2a}}</style>
</head><body>
<h1>Tombstone reconciler report</h1>
<p>Scan {esc(str(scan["scan_id"]))} of cluster {esc(str(scan["cluster_name"]))},
started {esc(str(scan["started"]))}; age window {summary["config"]["min_age_days"]} days;
orphan share: ledgers {summary["orphan_share"]["ledgers"]:.2%},
objects {summary["orphan_share"]["objects"]:.2%}.</p>
{verdict}
<h2>Findings by kind</h2>
<img src="{PLOTS_DIR}/{PLOT_KINDS}" alt="findings by kind">
{_table(totals, ("source", "kind", "count", "bytes"), ("bytes",))}
<h2>Reclaimable bytes per namespace</h2>
<img src="{PLOTS_DIR}/{PLOT_NAMESPACES}" alt="reclaimable bytes per namespace">
{
        _table(
            top,
            ("namespace", "ledgers", "ledger_bytes", "offloads", "offload_bytes", "total_bytes"),
            ("ledger_bytes", "offload_bytes", "total_bytes"),
        )
    }
<h2>Orphan ages</h2>
<img src="{PLOTS_DIR}/{PLOT_AGES}" alt="orphan age histogram">
<h2>Also reported</h2>
<ul><li>{summary["dormant_topics"]} topics that look never loaded (retention cannot apply):
<code>dormant_topics/</code></li>
<li>{summary["inactive_cursors"]} inactive cursors: <code>inactive_cursors/</code></li></ul>
</body></html>
"""
