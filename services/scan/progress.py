"""A progress bar for a Spark job group on a terminal (stderr), drawn by a polling thread."""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Any

BAR_WIDTH = 30


def render(done: int, total: int, label: str) -> str:
    """`label [#####-----] 5/10 tasks`."""
    filled = BAR_WIDTH * done // total if total else BAR_WIDTH
    return f"\r{label} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{total} tasks"


class TaskProgress:
    """Draws the completed tasks of `group`'s jobs every `interval` seconds while entered."""

    def __init__(
        self,
        sc: Any,
        group: str,
        *,
        enabled: bool,
        total: int,
        label: str = "extract",
        interval: float = 0.5,
    ) -> None:
        self._sc = sc
        self._group = group
        self._enabled = enabled and sys.stderr.isatty()
        self._total = total
        self._label = label
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TaskProgress:
        if self._enabled:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            # A full bar only when the tasks finished; cut short (SIGINT, error), just end
            # the line so the one message that follows stands on its own.
            done = exc_type is None
            sys.stderr.write(render(self._total, self._total, self._label) if done else "")
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _completed(self) -> int:
        tracker = self._sc.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                done += stage.numCompletedTasks if stage else 0
        return min(done, self._total)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            sys.stderr.write(render(self._completed(), self._total, self._label))
            sys.stderr.flush()
