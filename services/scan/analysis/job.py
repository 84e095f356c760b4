"""The analysis job: read an extract run, classify, check safety, write findings and report.

I/O happens only here (and in `schema` / `report`). Findings are written first and read
back, so the classification joins run once however many summaries are drawn from them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from services.core.errors import CorruptData
from services.scan import parquet_files
from services.scan.analysis import classify as A
from services.scan.analysis import clusters, insights, report_data, shared_report
from services.scan.analysis import references as R
from services.scan.analysis import sharing as S
from services.scan.analysis.candidates import deletion_candidates
from services.scan.analysis.canonical import (
    name_problems,
    problems_frame,
    reject_noncanonical,
    unchecked,
)
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.safety import SafetyVerdict, check_safety, gate_candidates
from services.scan.progress import StepProgress
from services.scan.report.format import human_duration
from services.scan.report.write import write_html_report, write_summary
from services.scan.schema import Extract, read_extract

log = structlog.get_logger(__name__)

#: Output datasets under the run's output directory.
OUT_LEDGERS = "findings/ledgers"
OUT_OBJECTS = "findings/objects"
OUT_CANDIDATES = "candidates"
OUT_COUNTS = "counts_by_kind"
OUT_RECLAIMABLE = "reclaimable_by_namespace"
OUT_DORMANT = "dormant_topics"
OUT_INACTIVE = "inactive_cursors"


@dataclass(frozen=True)
class ScanInfo:
    scan_id: str
    cluster_name: str | None
    started_ms: int
    ended_ms: int | None
    objects_headed: bool | None = None
    """False: objects were not read with HEAD (`--no-head-objects`); None: not recorded."""
    shared_clusters: tuple[str, ...] = ()
    """The neighbours whose metadata the extract read (`--shared-cluster`)."""


@dataclass(frozen=True)
class Analysis:
    """The lazily computed results of one analysis (nothing runs until written).

    The findings' owner names are not checked yet (`name_problem` is empty, and a finding
    with a noncanonical name may still read deletable): `run_analysis` checks the written
    findings, `canonical.check_names` checks them in memory. Nothing may propose
    candidates from these findings before one of the two."""

    ledger_findings: DataFrame
    object_findings: DataFrame
    dormant_topics: DataFrame
    inactive_cursors: DataFrame
    references: R.References | None = None
    """What the ledger findings join (`release` once they are written)."""


@dataclass(frozen=True)
class AnalysisOutcome:
    out_dir: Path
    verdict: SafetyVerdict
    summary: dict[str, Any]


def collect_rows(df: DataFrame) -> list[dict[str, Any]]:
    """A small table's rows, as dicts (scan_run, the manifest: read once, used by several)."""
    return [row.asDict() for row in df.collect()]


def scan_info(scan_run: Sequence[Mapping[str, Any]]) -> ScanInfo:
    """The one scan_run row; its start is "now" for every age."""
    if len(scan_run) != 1:
        raise CorruptData(f"scan_run must hold exactly one row, found {len(scan_run)}")
    row = scan_run[0]
    return ScanInfo(
        row["scan_id"],
        row["cluster_name"],
        row["started_ms"],
        row["ended_ms"],
        row["objects_headed"],
        tuple(row["shared_clusters"] or ()),
    )


def sharing_of(extract: Extract, config: AnalyzeConfig) -> S.Sharing:
    """What the extract read of the clusters sharing the ledgers root, and the operator's
    `--deleted-namespace` names."""
    return sharing_from(collect_rows(extract.scan_run), collect_rows(extract.scan_manifest), config)


def sharing_from(
    scan_run: Sequence[Mapping[str, Any]],
    manifest: Sequence[Mapping[str, Any]],
    config: AnalyzeConfig,
) -> S.Sharing:
    """`sharing_of` from the scan_run and manifest rows, collected once by the caller."""
    declared = {name for row in scan_run for name in row["shared_clusters"] or ()}
    # A failed listing is a manifest row too (and refuses the run): listed means "attempted".
    listed = any(row["kind"] == "namespaces" for row in manifest)
    return S.Sharing(config.cluster, tuple(sorted(declared)), listed, config.deleted_namespaces)


def analyze(
    extract: Extract, config: AnalyzeConfig, *, now_ms: int, sharing: S.Sharing | None = None
) -> Analysis:
    """Classify ledgers and objects and derive the reports (returns DataFrames; the two
    small jobs it runs compute and cache the references, `references.references`).

    References count from every cluster the extract read; owners only from this one (a
    neighbour's owner sets its ledger apart, `services.scan.analysis.sharing`). Without
    `sharing`, it is read from the extract (`sharing_of`)."""
    # Every cluster's references protect a ledger; only ours own, list and report.
    refs = R.references(
        extract.managed_ledgers, extract.ml_ledgers, extract.cursors, extract.schemas
    )
    mls, cursors = S.ours(extract.managed_ledgers), S.ours(extract.cursors)
    owners = A.reference_owners(mls, cursors, S.ours(extract.schemas))
    shared = S.frames(
        extract.managed_ledgers,
        extract.schemas,
        extract.namespaces,
        sharing if sharing is not None else sharing_of(extract, config),
    )
    ledgers = A.classify_ledgers(
        extract.bk_ledgers,
        refs,
        owners,
        now_ms=now_ms,
        min_age_ms=config.min_age_ms,
        sharing=shared,
    )
    objects = A.classify_objects(
        extract.offload_objects,
        extract.ml_ledgers,
        cluster=config.cluster,
        now_ms=now_ms,
        min_age_ms=config.min_age_ms,
        owners=owners,
        sharing=shared,
    )
    # Names from ZooKeeper, custom metadata and object metadata become PDLI fields: only
    # canonical ones may be proposed. They are checked on the written findings
    # (`run_analysis`, `_write_checked`); `canonical.check_names` checks findings in memory.
    ledgers, objects = unchecked(ledgers), unchecked(objects)
    dormant = insights.dormant_topics(
        mls,
        S.ours(extract.ml_ledgers),
        extract.bk_ledgers,
        now_ms=now_ms,
        dormant_age_ms=_ms(config.dormant_topic_age.total_seconds()),
    )
    inactive = insights.inactive_cursors(
        cursors,
        now_ms=now_ms,
        inactive_age_ms=_ms(config.inactive_cursor_age.total_seconds()),
    )
    return Analysis(ledgers, objects, dormant, inactive, refs)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def _component_of(findings: str) -> Column:
    """The component of the PDLIs each findings table's rows would become."""
    return F.col("pdli_component") if findings == OUT_LEDGERS else F.lit("MANAGED_LEDGER")


#: The column findings are partitioned by on disk (`findings/ledgers/kind=topic_gone/...`).
#: Every step after the findings reads the few kinds that are not `referenced`: partitioned,
#: it reads their folders only, and never again the millions of referenced rows.
FINDINGS_PARTITION = "kind"


def _write_checked(df: DataFrame, out: Path, name: str) -> DataFrame:
    """Write findings (partitioned by kind), then check the owner names of their deletable
    rows (distinct names only, read back from the files); only when some are not canonical
    are the findings written again, with those rows made `noncanonical_name`
    (`services.scan.analysis.canonical`).
    """
    written = _write(df, out, name, partition=FINDINGS_PARTITION)
    component = _component_of(name)
    problems = name_problems(written, component)
    if not problems:
        return written
    log.warning("noncanonical owner names among the orphans", findings=name, names=len(problems))
    bad = problems_frame(df.sparkSession, problems)
    again = out / f"{name}.checked"
    _save(reject_noncanonical(written, bad, component), again, partition=FINDINGS_PARTITION)
    shutil.rmtree(out / name)
    os.replace(again, out / name)
    return _read_back(df, out / name)


def _write(df: DataFrame, out: Path, name: str, *, partition: str | None = None) -> DataFrame:
    _save(df, out / name, partition=partition)
    return _read_back(df, out / name)


def _save(df: DataFrame, path: Path, *, partition: str | None = None) -> None:
    writer = df.write.mode("overwrite")
    if partition is not None:
        writer = writer.partitionBy(partition)
    writer.parquet(str(path))


def _read_back(df: DataFrame, path: Path) -> DataFrame:
    """The table `df` was written to, with its columns in `df`'s order. The schema is the
    one just written: reading it back infers nothing (inferring is a Spark job)."""
    read = df.sparkSession.read.schema(df.schema).parquet(str(path))
    # A partition column comes back last; the findings keep the order they were built in.
    return read.select(*df.columns)


def warn_if_short_window(config: AnalyzeConfig) -> None:
    if config.below_floor:
        log.warning(
            "AGE WINDOW BELOW THE SAFETY FLOOR: unreferenced ledgers younger than the floor "
            "may still be about to be referenced (rollover, cursor, schema, compaction)",
            min_age=str(config.min_age),
        )


#: What the analysis bar counts: each step ends with its output written.
ANALYSIS_STEPS = ("ledgers", "objects", "safety", "candidates", "insights", "report")


def warn_if_unattributed(info: ScanInfo) -> None:
    if info.objects_headed is False:
        log.warning(
            "OBJECTS NOT READ WITH HEAD (--no-head-objects): their cluster is unknown, so "
            "another cluster's objects in a shared bucket may be proposed"
        )
    elif info.objects_headed is None:
        log.warning(clusters.HEAD_UNRECORDED)


def run_analysis(
    spark: SparkSession,
    extract_dir: str | Path,
    out_dir: str | Path,
    config: AnalyzeConfig,
    *,
    run_ids: Mapping[str, str | None] | None = None,
    progress: bool = False,
) -> AnalysisOutcome:
    """Analyse the extract in `extract_dir` and write findings, candidates and the report
    (with `progress`, a bar of ANALYSIS_STEPS on a terminal's stderr).

    `run_ids` (`run_id`, `previous_run_id` of a versioned run, `services.scan.cli.runs`) go into
    summary.json, so the report compares the run with the one before it."""
    steps = StepProgress(ANALYSIS_STEPS, label="analysis", enabled=progress)
    warn_if_short_window(config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    extract = read_extract(spark, extract_dir)
    # The two small tables every check and summary reads: collected once.
    scan_run, manifest = collect_rows(extract.scan_run), collect_rows(extract.scan_manifest)
    info = scan_info(scan_run)
    warn_if_unattributed(info)
    sharing = sharing_from(scan_run, manifest, config)
    analysis = analyze(extract, config, now_ms=info.started_ms, sharing=sharing)
    ledgers = _write_checked(analysis.ledger_findings, out, OUT_LEDGERS)
    if analysis.references is not None:
        analysis.references.release()
    steps.advance("ledgers")
    objects = _write_checked(analysis.object_findings, out, OUT_OBJECTS)
    steps.advance("objects")
    _write(insights.counts_by_kind(ledgers, objects).coalesce(1), out, OUT_COUNTS)
    count_rows = parquet_files.rows(out / OUT_COUNTS)
    verdict = check_safety(extract, count_rows, config, scan_run=scan_run, manifest=manifest)
    steps.advance("safety")
    # Kept in memory (it is small): written when allowed, and summed per namespace either way.
    ungated = deletion_candidates(ledgers, objects).persist()
    candidates = _write(gate_candidates(ungated, verdict), out, OUT_CANDIDATES)
    steps.advance("candidates")
    _write(insights.reclaimable_by_namespace(ungated).coalesce(1), out, OUT_RECLAIMABLE)
    _write(analysis.dormant_topics, out, OUT_DORMANT)
    _write(analysis.inactive_cursors, out, OUT_INACTIVE)
    steps.advance("insights")
    totals, plan = report_data.candidate_totals_and_plan(candidates)
    summary = build_summary(
        info,
        config,
        verdict,
        count_rows,
        parquet_files.rows(out / OUT_RECLAIMABLE),
        totals,
        parquet_files.row_count(out / OUT_DORMANT),
        parquet_files.row_count(out / OUT_INACTIVE),
    )
    summary |= clusters.object_clusters(objects)
    summary |= shared_report.summarize(extract, ledgers, objects, sharing)
    summary["warnings"] += summary["shared_bookkeeper"]["warnings"]
    summary |= report_sections(manifest, ledgers, objects, candidates, config, verdict, out)
    summary["submit_plan"] = plan
    summary |= dict(run_ids or {})
    write_summary(out, summary)
    write_html_report(out, summary)
    steps.advance("report")
    ungated.unpersist()
    log.info("reconcile analysis done", out=str(out), refused=verdict.refused)
    return AnalysisOutcome(out, verdict, summary)


def report_sections(
    manifest: Sequence[Mapping[str, Any]],
    ledgers: DataFrame,
    objects: DataFrame,
    candidates: DataFrame,
    config: AnalyzeConfig,
    verdict: SafetyVerdict,
    out: Path,
) -> dict[str, Any]:
    """What the report shows beyond the counts and the submit plan (also writes tasks.csv and
    items.csv)."""
    edges = report_data.age_edges_s(int(config.min_age.total_seconds()))
    # Counted, binned, listed and written, each from the findings' files (everything not
    # referenced, filtered by kind): cached instead, building the cache cost more than
    # reading them again.
    items = report_data.report_items(ledgers, objects, candidates, verdict.refused)
    listed, bins = report_data.summarize_items(items, out, edges)
    return {
        "coverage": report_data.coverage(manifest, out),
        "items": listed,
        "age_histogram": {"edges_s": edges, "bins": bins},
    }


def build_summary(
    info: ScanInfo,
    config: AnalyzeConfig,
    verdict: SafetyVerdict,
    counts: list[dict[str, Any]],
    reclaimable: list[dict[str, Any]],
    candidates: dict[str, int],
    dormant_topics: int,
    inactive_cursors: int,
) -> dict[str, Any]:
    """The machine-readable summary written as summary.json."""
    top = sorted(reclaimable, key=lambda r: r["total_bytes"], reverse=True)[:50]
    return {
        "scan": {
            "scan_id": info.scan_id,
            "cluster_name": info.cluster_name,
            "started": datetime.fromtimestamp(info.started_ms / 1000, UTC).isoformat(),
            "started_ms": info.started_ms,
            "ended_ms": info.ended_ms,
            "objects_headed": info.objects_headed,
        },
        "config": {
            "cluster": config.cluster,
            "min_age_s": config.min_age.total_seconds(),
            "min_age": human_duration(config.min_age.total_seconds()),
            "min_age_below_floor": config.below_floor,
            "max_orphan_share": config.max_orphan_share,
            "deleted_namespaces": list(config.deleted_namespaces),
        },
        "risky_options": clusters.risky_options(
            below_floor=config.below_floor,
            objects_headed=info.objects_headed,
            deleted_namespaces=bool(config.deleted_namespaces),
        ),
        "warnings": clusters.warnings(info.objects_headed),
        "dry_run": True,
        "refused": verdict.refused,
        "refusal_reasons": list(verdict.reasons),
        "orphan_share": {
            "ledgers": verdict.ledger_orphan_share,
            "objects": verdict.object_orphan_share,
        },
        "counts": sorted(counts, key=lambda r: (r["source"], r["kind"], r["orphan_reason"] or "")),
        "candidates": candidates,
        "reclaimable_bytes_total": sum(r["total_bytes"] for r in reclaimable),
        "reclaimable_by_namespace_top": top,
        "dormant_topics": dormant_topics,
        "inactive_cursors": inactive_cursors,
    }
