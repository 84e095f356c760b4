"""`tombstone reconcile`: extract, find orphaned ledgers and objects, and (on request) mark them."""

from __future__ import annotations

from typing import Any

import click

from services.core.errors import TombstoneError
from services.scan.cli_extract import extract, run
from services.scan.cli_options import (
    analysis_options,
    analyze_config,
    finish,
    session,
    submit_options,
    submit_settings,
    warn_risky_extract,
)


@click.group()
def reconcile() -> None:
    """The PySpark reconciler: extract, analyze (dry run) and, with --submit, mark orphans."""


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
@analysis_options
@submit_options
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
    **submit_args: Any,
) -> None:
    """Classify every ledger and offloaded object of an extract run and write the report."""
    try:
        config = analyze_config(
            cluster,
            min_age,
            allow_short_min_age,
            max_orphan_share,
            inactive_cursor_age,
            dormant_topic_age,
        )
        submit = submit_settings(**submit_args)
        from services.scan.job import run_analysis

        spark = session(master)
        try:
            outcome = run_analysis(spark, extract_dir, out_dir, config)
        finally:
            spark.stop()
        warn_risky_extract(outcome.summary)
        finish(outcome, out_dir, submit)
    except TombstoneError as exc:
        raise click.ClickException(str(exc)) from exc


reconcile.add_command(extract)
reconcile.add_command(run)
