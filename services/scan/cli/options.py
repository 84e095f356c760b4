"""Options and steps shared by `tombstone reconcile analyze`, `extract` and `run`."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from services.core.config import ClientConfig, OffloadDefaults
from services.core.errors import InvalidArgument
from services.scan.analysis.config import DEFAULT_MIN_AGE, AnalyzeConfig, parse_duration
from services.scan.cli.errors import UsageProblem
from services.scan.cli.runs import RunFolder
from services.scan.cli.sharing import (
    deleted_namespace_option,
    deleted_namespaces,
    warn_deleted_namespaces,
)
from services.scan.report.format import human_bytes
from services.scan.report.sections import NO_HEAD_OBJECTS
from services.scan.submit.plan import Plan, PlanRefused, read_plan, select
from services.scan.submit.send import SubmitSettings

F = Callable[..., Any]


def analysis_options(func: F) -> F:
    """--cluster, --min-age, --allow-short-min-age, --max-orphan-share, the report ages and
    --deleted-namespace."""
    options: list[Callable[[F], F]] = [
        click.option(
            "--cluster", required=True, help="The Pulsar cluster name the extract must match."
        ),
        click.option(
            "--min-age",
            default=f"{DEFAULT_MIN_AGE.days}d",
            show_default=True,
            help="Age window, a duration (e.g. 90s, 6h, 3d): younger unreferenced ledgers and "
            "objects are never proposed.",
        ),
        click.option(
            "--allow-short-min-age",
            is_flag=True,
            help="Accept a --min-age below the 1-day safety floor (logged loudly).",
        ),
        click.option(
            "--max-orphan-share",
            default=0.2,
            show_default=True,
            type=float,
            help="Refuse to propose deletions above this orphan share.",
        ),
        click.option(
            "--inactive-cursor-age",
            default="30d",
            show_default=True,
            help="Report a cursor not moved for this long (a duration, e.g. 30d); report only.",
        ),
        click.option(
            "--dormant-topic-age",
            default="7d",
            show_default=True,
            help="Report a topic not written for this long (a duration, e.g. 7d); report only.",
        ),
        deleted_namespace_option,
        click.option(
            "--master",
            default="local[*]",
            show_default=True,
            help="Spark master; 'submit' takes the one spark-submit was given.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def submit_options(func: F) -> F:
    """--submit and how to reach the marker."""
    options = [
        click.option(
            "--submit",
            is_flag=True,
            help="Send the candidates to the marker as RECONCILER requests (default: dry run).",
        ),
        click.option(
            "--marker-address",
            default=None,
            help="host:port of the marker (else TOMBSTONE_MARKER_ADDRESS; token in "
            "TOMBSTONE_MARKER_TOKEN).",
        ),
        click.option(
            "--submit-rate",
            default=20.0,
            show_default=True,
            type=click.FloatRange(min=0, min_open=True),
            help="MarkLedgers calls per second (> 0).",
        ),
        click.option(
            "--submit-concurrency",
            type=click.IntRange(min=1),
            default=4,
            show_default=True,
            help="Most calls at once (ceiling of the adaptive limit).",
        ),
        click.option(
            "--submit-concurrency-min",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Floor of the adaptive limit of calls at once.",
        ),
        click.option(
            "--submit-batch",
            type=click.IntRange(min=1),
            default=1000,
            show_default=True,
            help="Ledgers per MarkLedgers call (≥ 1).",
        ),
        click.option(
            "--yes",
            is_flag=True,
            help="Submit without asking (required with --submit when stdin is not a terminal).",
        ),
        click.option(
            "--plan",
            "plan_dir",
            default=None,
            type=click.Path(file_okay=False),
            help="With --submit: an earlier complete dry run (OUT/<run id>); only its "
            "candidates that the fresh analysis still proposes are sent.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def submit_settings(
    *,
    submit: bool,
    marker_address: str | None,
    submit_rate: float,
    submit_concurrency: int,
    submit_batch: int,
    submit_concurrency_min: int = 1,
) -> SubmitSettings | None:
    """None for a dry run. Checked before any Spark work."""
    if not submit:
        return None
    for name, value in (
        ("submit_rate", submit_rate),
        ("submit_concurrency", submit_concurrency),
        ("submit_concurrency_min", submit_concurrency_min),
        ("submit_batch", submit_batch),
    ):
        if value <= 0:
            raise InvalidArgument(name, f"must be positive, got {value}")
    if submit_concurrency_min > submit_concurrency:
        raise InvalidArgument("submit_concurrency_min", "must not exceed submit_concurrency")
    marker = ClientConfig.from_env(target="MARKER", default_address="127.0.0.1:50051")
    if marker_address:
        marker = dataclasses.replace(marker, address=marker_address)
    return SubmitSettings(
        marker=marker,
        rate_per_s=submit_rate,
        concurrency=submit_concurrency,
        concurrency_min=submit_concurrency_min,
        batch=submit_batch,
        offload_driver=OffloadDefaults.from_env().driver,
    )


def analyze_config(
    cluster: str,
    min_age: str,
    allow_short_min_age: bool,
    max_orphan_share: float,
    inactive_cursor_age: str,
    dormant_topic_age: str,
    deleted_namespace: tuple[str, ...] = (),
) -> AnalyzeConfig:
    config = AnalyzeConfig(
        cluster=cluster,
        min_age=parse_duration(min_age, "min_age"),
        allow_short_min_age=allow_short_min_age,
        max_orphan_share=max_orphan_share,
        inactive_cursor_age=parse_duration(inactive_cursor_age, "inactive_cursor_age"),
        dormant_topic_age=parse_duration(dormant_topic_age, "dormant_topic_age"),
        deleted_namespaces=deleted_namespaces(deleted_namespace),
    )
    warn_deleted_namespaces(config.deleted_namespaces)
    if config.below_floor:
        click.secho(
            f"WARNING: --min-age {min_age} is below the safety floor; young unreferenced "
            "ledgers may be proposed for deletion.",
            fg="red",
            bold=True,
            err=True,
        )
    return config


def spark_log_path() -> Path:
    """Where the JVM's own output (log4j, JVM warnings, the Python workers' stderr) goes."""
    import os
    import tempfile

    return Path(tempfile.gettempdir()) / f"tombstone-spark-{os.getpid()}.log"


def warn_risky_extract(summary: dict[str, Any]) -> None:
    """What the extract itself recorded as risky (the analysis of an extract made apart)."""
    if NO_HEAD_OBJECTS in summary.get("risky_options", []):
        click.secho(
            "WARNING: the extract was made with --no-head-objects: the objects' cluster is "
            "unknown, so another cluster's objects in a shared bucket may be proposed.",
            fg="red",
            bold=True,
            err=True,
        )
    for warning in summary.get("warnings", []):
        click.secho(f"WARNING: {warning}.", fg="red", bold=True, err=True)


def session(master: str) -> Any:
    # Spark is imported only when a run really starts (`--help` stays fast).
    import structlog

    from services.scan.spark import build_session

    log_path = spark_log_path()
    structlog.get_logger(__name__).info("spark output", log=str(log_path))
    return build_session(None if master == "submit" else master, jvm_log=log_path)


@dataclass(frozen=True)
class SubmitRequest:
    """What --submit, --yes and --plan ask for, checked before any Spark work."""

    settings: SubmitSettings
    assume_yes: bool
    plan: Plan | None


def submit_request(
    *, cluster: str, yes: bool, plan_dir: str | None, **submit_args: Any
) -> SubmitRequest | None:
    """None for a dry run. Without a terminal to ask on, --submit needs --yes."""
    settings = submit_settings(**submit_args)
    if settings is None:
        if plan_dir is not None:
            raise UsageProblem("--plan only applies with --submit")
        return None
    if not yes and not sys.stdin.isatty():
        raise UsageProblem(
            "--submit needs --yes when stdin is not a terminal (nobody to confirm the submit)"
        )
    plan = None
    if plan_dir is not None:
        try:
            plan = read_plan(plan_dir, cluster)
        except PlanRefused as exc:
            raise UsageProblem(f"--plan refused: {exc}") from None
    return SubmitRequest(settings, yes, plan)


def finish(outcome: Any, run: RunFolder, submit: SubmitRequest | None) -> int:
    """Print the outcome; submit the candidates when asked and allowed. The exit status:
    3 if refused, 4 if a call failed, else 0."""
    summary = outcome.summary
    click.echo(f"report: {run.path / 'report.html'}")
    if outcome.verdict.refused:
        click.echo("REFUSED: no deletion candidates. Reasons:", err=True)
        for reason in outcome.verdict.reasons:
            click.echo(f"  - {reason}", err=True)
        return 3
    cands = summary["candidates"]
    if submit is None:
        click.echo(f"{cands['count']} deletion candidates ({cands['bytes']} bytes); dry run.")
        return 0
    return submit_candidates(run, submit, cluster=summary["config"]["cluster"])


def submit_candidates(run: RunFolder, request: SubmitRequest, *, cluster: str) -> int:
    """Send the written candidates (those of the plan, with --plan) to the marker, after
    asking on the terminal unless --yes; 4 when a call failed."""
    from services.scan.progress import CountProgress
    from services.scan.submit.send import (
        mark_submit_started,
        read_candidates,
        record_submission,
        scan_started_ms,
        submit,
    )

    candidates = read_candidates(run.path)
    selection = select(request.plan, candidates, run.path) if request.plan else None
    if selection is not None:
        candidates = selection.send
        click.echo(
            f"plan {selection.plan.run_id}: {len(selection.send)} of "
            f"{len(selection.plan.keys)} planned candidates still proposed; "
            f"{len(selection.no_longer)} no longer candidates (not sent); "
            f"{selection.outside_plan} new candidates outside the plan (not sent)"
        )
    size = human_bytes(sum(int(c.get("size_bytes") or 0) for c in candidates))
    address = request.settings.marker.address
    question = (
        f"Submit {len(candidates)} candidates ({size}) of cluster {cluster} "
        f"to the marker at {address}?"
    )
    if candidates and not request.assume_yes and not click.confirm(question, default=False):
        click.echo("not submitted: the run stays a dry run (usable as a --plan).")
        return 0
    mark_submit_started(run.path)
    bar = CountProgress(label="submit", unit="calls")
    seen_at = scan_started_ms(run.path)
    report = asyncio.run(
        submit(candidates, request.settings, seen_at_ms=seen_at, on_call_done=bar.update)
    )
    extra = selection.record() if selection is not None else None
    path = record_submission(run.path, report, extra)
    click.echo(
        f"submitted {len(candidates)} candidates in {report.calls} MarkLedgers calls: "
        f"{report.marked['LEDGER']} BookKeeper and {report.marked['OFFLOAD_LEDGER']} offloaded "
        f"copies marked, {len(report.not_marked)} refused by the marker, "
        f"{len(report.skipped)} skipped ({path})"
    )
    if not report.ok:
        for error in report.errors[:10]:
            click.echo(f"  error: {error['owner']}: {error['error']}", err=True)
        return 4
    return 0
