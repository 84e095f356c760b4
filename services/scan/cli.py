"""`tombstone reconcile`: find orphaned ledgers and objects from an extract run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from services.core.errors import TombstoneError
from services.scan.config import DEFAULT_MIN_AGE, AnalyzeConfig, parse_duration


@click.group()
def reconcile() -> None:
    """The PySpark reconciler (analysis of an extract run; dry run only for now)."""


@reconcile.command()
@click.option(
    "--extract",
    "extract_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Extract run directory (one Parquet dataset per table).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output directory for findings, candidates, summary.json and report.html.",
)
@click.option("--cluster", required=True, help="The Pulsar cluster name the extract must match.")
@click.option(
    "--min-age",
    default=f"{DEFAULT_MIN_AGE.days}d",
    show_default=True,
    help="Age window: younger unreferenced ledgers and objects are never proposed.",
)
@click.option(
    "--allow-short-min-age",
    is_flag=True,
    help="Accept a --min-age below the 1-day safety floor (logged loudly).",
)
@click.option(
    "--max-orphan-share",
    default=0.2,
    show_default=True,
    type=float,
    help="Refuse to propose deletions above this orphan share.",
)
@click.option("--inactive-cursor-age", default="30d", show_default=True)
@click.option("--dormant-topic-age", default="7d", show_default=True)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    help="Spark master; 'submit' takes the one spark-submit was given.",
)
@click.option(
    "--submit", is_flag=True, help="Send the candidates to the marker (not available yet)."
)
def analyze(
    extract_dir: str,
    out_dir: str,
    cluster: str,
    min_age: str,
    allow_short_min_age: bool,
    max_orphan_share: float,
    inactive_cursor_age: str,
    dormant_topic_age: str,
    master: str,
    submit: bool,
) -> None:
    """Classify every ledger and offloaded object of an extract run and write the report."""
    try:
        config = AnalyzeConfig(
            cluster=cluster,
            min_age=parse_duration(min_age, "min_age"),
            allow_short_min_age=allow_short_min_age,
            max_orphan_share=max_orphan_share,
            inactive_cursor_age=parse_duration(inactive_cursor_age, "inactive_cursor_age"),
            dormant_topic_age=parse_duration(dormant_topic_age, "dormant_topic_age"),
        )
        if submit:
            # Fail before any Spark work: the seam exists, the transport does not.
            from services.scan.job import submit_candidates

            submit_candidates(Path(out_dir) / "candidates")
        if config.below_floor:
            click.secho(
                f"WARNING: --min-age {min_age} is below the safety floor; young unreferenced "
                "ledgers may be proposed for deletion.",
                fg="red",
                bold=True,
                err=True,
            )
        _run(extract_dir, out_dir, config, master)
    except TombstoneError as exc:
        raise click.ClickException(str(exc)) from exc


def _run(extract_dir: str, out_dir: str, config: AnalyzeConfig, master: str) -> None:
    # Spark is imported only when a run really starts (`--help` stays fast).
    from services.scan.job import run_analysis
    from services.scan.spark import build_session

    spark = build_session(None if master == "submit" else master)
    try:
        outcome = run_analysis(spark, extract_dir, out_dir, config)
    finally:
        spark.stop()
    summary = outcome.summary
    click.echo(f"report: {Path(out_dir) / 'report.html'}")
    if outcome.verdict.refused:
        click.echo("REFUSED: no deletion candidates. Reasons:", err=True)
        for reason in outcome.verdict.reasons:
            click.echo(f"  - {reason}", err=True)
        sys.exit(3)
    cands = summary["candidates"]
    click.echo(f"{cands['count']} deletion candidates ({cands['bytes']} bytes); dry run.")
