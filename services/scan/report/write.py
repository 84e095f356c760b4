"""The human report (one self-contained `report.html`) and the JSON summary.

The report is drawn from `summary.json` alone, plus `submitted.json` after a submit and the
previous run's folder for the differences; so it needs no Spark and no Parquet, and can be
drawn again (`write_html_report(run_dir)`) once a submit has written its record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from services.scan.report import findings
from services.scan.report import sections as run
from services.scan.report.clusters import other_clusters
from services.scan.report.format import human_bytes, human_duration
from services.scan.report.history import diff_runs, previous_run
from services.scan.report.html_blocks import page, para, text
from services.scan.report.shared import shared_bookkeeper

__all__ = ["human_bytes", "previous_run", "read_submitted", "write_html_report", "write_summary"]

REPORT_FILE = "report.html"
SUMMARY_FILE = "summary.json"
SUBMITTED_FILE = "submitted.json"


def write_summary(out_dir: Path, summary: Mapping[str, Any]) -> Path:
    path = Path(out_dir) / SUMMARY_FILE
    path.write_text(json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n")
    return path


def read_submitted(run_dir: Path) -> dict[str, Any] | None:
    """The submit record of this run folder, None when the run did not submit."""
    path = Path(run_dir) / SUBMITTED_FILE
    if not path.is_file():
        return None
    try:
        body = json.loads(path.read_text())
    except ValueError:
        return {"errors": [{"error": f"{SUBMITTED_FILE} is not valid JSON"}]}
    return body if isinstance(body, dict) else None


def write_html_report(run_dir: Path, summary: Mapping[str, Any] | None = None) -> Path:
    """Write `report.html` in `run_dir` from `summary` (default: the folder's summary.json)."""
    run_dir = Path(run_dir)
    if summary is None:
        summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    path = run_dir / REPORT_FILE
    path.write_text(render(run_dir, summary))
    return path


def render(run_dir: Path, summary: Mapping[str, Any]) -> str:
    submitted = read_submitted(run_dir)
    refused = bool(summary.get("refused"))
    parts = [
        "<h1>Tombstone reconciler report</h1>",
        _meta(summary),
        run.banner(summary),
        run.verdict(summary, submitted),
        run.submitted_section(submitted) if submitted is not None else run.submit_plan(summary),
        findings.coverage(summary),
        other_clusters(summary),
        shared_bookkeeper(summary),
    ]
    if not refused:
        parts += [
            findings.items(summary),
            findings.kinds(summary),
            findings.namespaces(summary),
            findings.ages(summary),
        ]
    parts += [run.history(diff_runs(run_dir, summary), summary), findings.also(summary)]
    return page("Tombstone reconciler report", *parts)


def _meta(summary: Mapping[str, Any]) -> str:
    scan, config = summary.get("scan", {}), summary.get("config", {})
    share = summary.get("orphan_share", {})
    run_id = summary.get("run_id")
    return para(
        (f"Run <code>{text(run_id)}</code>: " if run_id else "")
        + f"scan <code>{text(scan.get('scan_id'))}</code> of cluster "
        f"<b>{text(scan.get('cluster_name'))}</b>, started {text(scan.get('started'))}. "
        f"Age window {text(human_duration(findings.min_age_s(summary)))}; orphan share of "
        f"Pulsar-owned ledgers {share.get('ledgers', 0.0):.1%}, of objects "
        f"{share.get('objects', 0.0):.1%} (refusal above "
        f"{float(config.get('max_orphan_share', 0.0)):.0%}).",
        "meta",
    )
