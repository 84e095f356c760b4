"""Versioned runs of `reconcile analyze` and `reconcile run` under one `--out` folder.

Each run writes into its own folder `OUT/<UTC YYYYmmddTHHMMSSZ>/`, never reused. A file
`INCOMPLETE` is created in it first and removed only once the run has finished (report
written, and the submit done when asked); then `OUT/latest` is pointed at the newest complete
run. A run cut short (error, SIGINT) keeps `INCOMPLETE`, and `latest` does not move: the
previous run's report, the next run's "since the previous run" section and a `--plan` never
take a partial run for a finished one.

An `OUT` holding an older unversioned run (files straight in it) is left as it is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from services.scan.report.history import INCOMPLETE, RUN_NAME, is_complete_run, previous_run

LATEST = "latest"
_STAMP = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class RunFolder:
    path: Path
    previous_id: str | None
    """The newest complete run beside this one when it started (None for the first)."""

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def out(self) -> Path:
        return self.path.parent

    def ids(self) -> dict[str, str | None]:
        """What summary.json records of the run history."""
        return {"run_id": self.run_id, "previous_run_id": self.previous_id}


def run_name(at: datetime) -> str:
    return at.astimezone(UTC).strftime(_STAMP)


def start_run(out_dir: str | Path, now: datetime | None = None) -> RunFolder:
    """Create the run folder (the next free second from `now`) holding `INCOMPLETE`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    at = (now or datetime.now(UTC)).replace(microsecond=0)
    while True:
        path = out / run_name(at)
        try:
            # mkdir is the claim: two runs starting in the same second get two folders.
            path.mkdir()
            break
        except FileExistsError:
            at += timedelta(seconds=1)
    (path / INCOMPLETE).write_text("this run has not finished (or was interrupted)\n")
    previous = previous_run(path)
    return RunFolder(path, previous.name if previous else None)


def complete_run(run: RunFolder) -> None:
    """Mark the run finished, then point `latest` at the newest complete run."""
    (run.path / INCOMPLETE).unlink(missing_ok=True)
    update_latest(run.out)


def newest_complete(out_dir: Path) -> Path | None:
    runs = [p for p in Path(out_dir).iterdir() if is_complete_run(p)]
    return max(runs, key=lambda p: p.name, default=None)


def update_latest(out_dir: str | Path) -> Path | None:
    """Point `OUT/latest` at the newest complete run, atomically: a reader sees the old link
    or the new one, never none (a relative link, so OUT can be moved)."""
    out = Path(out_dir)
    newest = newest_complete(out)
    if newest is None:
        return None
    link = out / LATEST
    temp = out / f".{LATEST}.{os.getpid()}.tmp"
    temp.unlink(missing_ok=True)
    os.symlink(newest.name, temp)
    os.replace(temp, link)
    return newest


def is_run_name(name: str) -> bool:
    return RUN_NAME.match(name) is not None
