"""A progress bar for a Spark job group on a terminal (stderr), drawn by a polling thread."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any

BAR_WIDTH = 30


def render(done: int, total: int, label: str, unit: str = "tasks") -> str:
    """`label [#####-----] 5/10 tasks`."""
    filled = BAR_WIDTH * done // total if total else BAR_WIDTH
    return f"\r{label} [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done}/{total} {unit}"


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
        unit: str = "tasks",
        interval: float = 0.5,
    ) -> None:
        self._sc = sc
        self._group = group
        self._enabled = enabled and sys.stderr.isatty()
        self._total = total
        self._label = label
        self._unit = unit
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
            sys.stderr.write(
                render(self._total, self._total, self._label, self._unit) if done else ""
            )
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _completed(self) -> int:
        """Completed tasks of the stage that runs one task per counted item.

        Only stages of exactly `total` tasks count: the jobs of the group also run small
        aggregation stages, whose tasks would otherwise fill the bar early.
        """
        tracker = self._sc.statusTracker()
        done = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None and stage.numTasks == self._total:
                    done = max(done, stage.numCompletedTasks)
        return min(done, self._total)

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            sys.stderr.write(render(self._completed(), self._total, self._label, self._unit))
            sys.stderr.flush()


class StepProgress:
    """Draws `label [###---] k/n step` on a terminal (stderr) as named steps complete.

    For work whose Spark task count is not known in advance (the analysis: a chain of writes,
    each its own jobs), steps are the honest unit: the bar never claims more than was done.
    """

    def __init__(self, steps: tuple[str, ...], *, label: str, enabled: bool = True) -> None:
        self._steps = steps
        self._label = label
        self._enabled = enabled and sys.stderr.isatty()
        self._done = 0

    def advance(self, step: str) -> None:
        """Mark `step` done (an unknown name still counts once; the bar stays bounded)."""
        self._done = min(self._done + 1, len(self._steps))
        if self._enabled:
            line = render(self._done, len(self._steps), self._label, "steps")
            sys.stderr.write(f"{line} {step:<12}")
            if self._done == len(self._steps):
                sys.stderr.write("\n")
            sys.stderr.flush()


class CountProgress:
    """`label [###---] k/n unit`, redrawn at most every `interval` seconds, on a terminal."""

    def __init__(
        self, *, label: str, unit: str, enabled: bool = True, interval: float = 0.2
    ) -> None:
        self._label = label
        self._unit = unit
        self._enabled = enabled and sys.stderr.isatty()
        self._interval = interval
        self._drawn_at = float("-inf")

    def update(self, done: int, total: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if done < total and now - self._drawn_at < self._interval:
            return
        self._drawn_at = now
        sys.stderr.write(render(min(done, total), total, self._label, self._unit))
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
