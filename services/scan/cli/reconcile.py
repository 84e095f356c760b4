"""`tombstone reconcile`: extract, find orphaned ledgers and objects, and (on request) mark them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from services.core.errors import TombstoneError
from services.scan.cli.extract import extract, run
from services.scan.cli.options import (
    analysis_options,
    analyze_config,
    finish,
    submit_options,
    submit_request,
    warn_risky_extract,
)
from services.scan.cli.run_guard import versioned_run
from services.scan.preflight.checks import require_extract


@click.group()
@click.pass_context
def reconcile(ctx: click.Context) -> None:
    """The PySpark reconciler: extract, analyze (dry run) and, with --submit, mark orphans."""
    ctx.call_on_close(quiet_cli())


def quiet_cli() -> Callable[[], None]:
    """Results on stdout, logs on stderr, and no third-party chatter on a normal run; returns
    what puts the process's logging back as it was (the command may run inside a test runner
    or another program, whose logging must not stay ours).

    Log lines (structlog, TOMBSTONE_LOG_LEVEL / _FORMAT) go to stderr so stdout carries only
    the results a script may parse. PySpark warns about the installed pandas version at import
    although the reconciler uses no pandas API.
    """
    import logging
    import warnings

    import structlog

    from services.core.config import LogConfig
    from services.core.logging import configure_logging

    saved_structlog = structlog.get_config()
    root = logging.getLogger()
    saved_root = (list(root.handlers), root.level)
    aiozk = logging.getLogger("aiozk")
    saved_aiozk = aiozk.level
    configure_logging(
        LogConfig.from_env(),
        stream=_CurrentStderr(),  # type: ignore[arg-type]
        cache_loggers=False,
    )
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
    # aiozk warns "Aborting connection" each time a client closes with its reader still
    # waiting, i.e. on every normal close; a failure reaches the run as an exception anyway.
    aiozk.setLevel(logging.ERROR)

    def restore() -> None:
        structlog.configure(**saved_structlog)
        root.handlers[:] = saved_root[0]
        root.setLevel(saved_root[1])
        aiozk.setLevel(saved_aiozk)

    return restore


class _CurrentStderr:
    """Whatever `sys.stderr` is at each write: the CLI may run inside a process that swaps it
    (a test runner), and a stream captured once could be closed by then."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


@reconcile.command()
@click.option(
    "--extract",
    "extract_dir",
    required=True,
    type=click.Path(),
    help="Extract run directory (one Parquet dataset per table).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(),
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
    deleted_namespace: tuple[str, ...],
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
            deleted_namespace,
        )
        submit = submit_request(cluster=cluster, **submit_args)
        require_extract(extract_dir, cluster, out_dir)
        with versioned_run(out_dir) as (run, holder):
            # Imported here (pyspark takes seconds to import): a SIGINT meanwhile is handled.
            from services.scan.analysis.job import run_analysis

            spark = holder.start(master)
            outcome = run_analysis(
                spark, extract_dir, run.path, config, run_ids=run.ids(), progress=True
            )
            holder.stop()
            warn_risky_extract(outcome.summary)
            status = finish(outcome, run, submit)
    except TombstoneError as exc:
        raise click.ClickException(str(exc)) from exc
    sys.exit(status)


reconcile.add_command(extract)
reconcile.add_command(run)
