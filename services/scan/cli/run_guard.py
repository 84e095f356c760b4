"""One versioned run of a reconcile command, and what SIGINT does to it.

SIGINT (Ctrl-C) at any point of a run (Spark starting, extract, analysis, the confirmation,
submit) ends the command with exit status 130 and one line on stderr naming the partial run
folder, which keeps its `INCOMPLETE` marker (`latest` is not moved). Spark is stopped with
its logging off, so no Java or Python stack reaches the terminal: the JVM runs in its own
session (`spark.build_session`), so the terminal's SIGINT reaches only this process, which
stops Spark itself.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from services.scan.cli.runs import RunFolder, complete_run, start_run

EXIT_INTERRUPTED = 130


class _DropInterrupts(logging.Filter):
    """py4j logs the KeyboardInterrupt of a call it was making, with its traceback, and also a
    failure of its clean-up that the interrupt caused (`BrokenPipeError` while shutting the
    connection down); the command reports the interrupt itself, in one line. It sits on the
    root's handlers: a logger's own filters never see records propagated from its children,
    such as `py4j.clientserver`'s."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return error is None or not _after_interrupt(error)


class SparkHolder:
    """The run's SparkSession, stopped once (quietly after an interrupt)."""

    def __init__(self) -> None:
        self.spark: Any = None

    def start(self, master: str) -> Any:
        from services.scan.cli.options import session

        main = threading.current_thread() is threading.main_thread()
        if main:
            # A SIGINT while the JVM starts would leave it half-launched (and holding our
            # stdout): it waits until the session exists, then interrupts as anywhere else.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self.spark = session(master)
            if main:
                # SparkContext installs a SIGINT handler that cancels the jobs through py4j
                # and then raises; the plain KeyboardInterrupt is enough (Spark is stopped
                # below), and it lets asyncio.run cancel a submit's calls cleanly.
                signal.signal(signal.SIGINT, signal.default_int_handler)
        finally:
            if main:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        return self.spark

    def stop(self, *, quiet: bool = False) -> None:
        spark, self.spark = self.spark, None
        if spark is None:
            return
        if quiet:
            logging.getLogger("py4j").setLevel(logging.CRITICAL + 1)
        try:
            if quiet:
                spark.sparkContext.setLogLevel("OFF")
            spark.stop()
        except Exception:
            if not quiet:
                raise


def _after_interrupt(error: BaseException) -> bool:
    """An error raised while a KeyboardInterrupt was being handled: py4j, cut mid-call by the
    interrupt, may fail its clean-up call to the JVM (`Py4JNetworkError: Answer from Java side
    is empty`), and that error replaces the interrupt."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


@contextmanager
def interruptible(describe: Callable[[], str]) -> Iterator[SparkHolder]:
    """Stop Spark when the block ends; on SIGINT (or an aborted prompt) stop it quietly,
    print `interrupted: <describe()>` alone and exit 130."""
    holder = SparkHolder()
    handlers = list(logging.getLogger().handlers)
    drop = _DropInterrupts()
    for handler in handlers:
        handler.addFilter(drop)
    try:
        yield holder
        holder.stop()
    except (KeyboardInterrupt, click.Abort, Exception) as exc:
        if not isinstance(exc, KeyboardInterrupt | click.Abort) and not _after_interrupt(exc):
            raise
        # A second Ctrl-C must not cut the clean-up short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        holder.stop(quiet=True)
        click.echo(f"interrupted: {describe()}", err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        holder.stop()
        for handler in handlers:
            handler.removeFilter(drop)


@contextmanager
def versioned_run(out_dir: str | Path) -> Iterator[tuple[RunFolder, SparkHolder]]:
    """Create the run folder and print it; on a normal exit stop Spark and mark the run
    complete; on an error leave it INCOMPLETE; on SIGINT also exit 130 with one line."""
    run: RunFolder | None = None

    def partial() -> str:
        return f"partial run left in {run.path} (marked INCOMPLETE)" if run else "no run folder"

    with interruptible(partial) as holder:
        run = start_run(out_dir)
        click.echo(f"run folder: {run.path}")
        yield run, holder
        holder.stop()
        complete_run(run)
