"""`python -m benchmarks._marker_probe`: the marker (`python -m services.marker`) with its
garbage collector's work counted, for `benchmarks.marker --probe`.

On SIGUSR1 the process writes, to the file `BENCH_MARKER_PROBE_FILE` names, how many
collections of each generation ran so far, the objects they found unreachable, and the CPU
seconds they took (thread time between the collector's start and stop callbacks), the names
of Python's threads by OS thread id (Python 3.11 does not give them to the kernel), with a
sequence number the reader waits for. Each SIGUSR2 switches the collector between what the
marker set up at start (`services.marker._collector`) and Python's defaults (nothing frozen,
thresholds 700/10/10), so that rounds of one run measure what that set-up saves; not
settings of the service.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from services.core.service_main import run_service
from services.marker.__main__ import main
from services.marker._collector import settle_heap

_started = [0.0]
_seconds = [0.0, 0.0, 0.0]
_sequence = [0]


def _on_collect(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started[0] = time.thread_time()
    else:
        _seconds[info["generation"]] += time.thread_time() - _started[0]


def _write(signum: int, frame: FrameType | None) -> None:
    _sequence[0] += 1
    figures = {
        "sequence": _sequence[0],
        "stats": gc.get_stats(),
        "seconds": _seconds,
        "threshold": gc.get_threshold(),
        "frozen": gc.get_freeze_count(),
        "python_defaults": _defaults[0],
        # Python's threads by OS thread id: the others are the libraries' own (C++) threads.
        "threads": {t.native_id: t.name for t in threading.enumerate()},
    }
    target = Path(os.environ["BENCH_MARKER_PROBE_FILE"])
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(figures))
    partial.replace(target)  # the reader never sees half a file


_defaults = [False]


def _switch(signum: int, frame: FrameType | None) -> None:
    _defaults[0] = not _defaults[0]
    if _defaults[0]:
        gc.unfreeze()
        gc.set_threshold(700, 10, 10)
    else:
        settle_heap()


if __name__ == "__main__":
    gc.callbacks.append(_on_collect)
    signal.signal(signal.SIGUSR1, _write)
    signal.signal(signal.SIGUSR2, _switch)
    run_service("marker", main)
