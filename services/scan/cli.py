"""`tombstone reconcile`: extract, find orphaned ledgers and objects, and (on request) mark them."""

from __future__ import annotations

import sys
from typing import Any

import click

from services.core.errors import TombstoneError
from services.scan.cli_extract import extract, run
from services.scan.cli_options import (
    analysis_options,
    analyze_config,
    finish,
    submit_options,
    submit_request,
)
from services.scan.run_guard import versioned_run


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
    help="Output directory: each run writes findings, candidates, summary.json and "
    "report.html into its own folder OUT/<UTC YYYYmmddTHHMMSSZ>/.",
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
    """Classify every ledger and offloaded object of an extract run and write the report
    into a new run folder OUT/<UTC time>/ (OUT/latest: the newest complete run)."""
    try:
        config = analyze_config(
            cluster,
            min_age,
            allow_short_min_age,
            max_orphan_share,
            inactive_cursor_age,
            dormant_topic_age,
        )
        submit = submit_request(cluster=cluster, **submit_args)
        with versioned_run(out_dir) as (run, holder):
            # Imported here (pyspark takes seconds to import): a SIGINT meanwhile is handled.
            from services.scan.job import run_analysis

            spark = holder.start(master)
            outcome = run_analysis(spark, extract_dir, run.path, config, run_ids=run.ids())
            holder.stop()
            status = finish(outcome, run, submit)
    except TombstoneError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(status)


reconcile.add_command(extract)
reconcile.add_command(run)
