"""`python -m benchmarks._marker_probe`: the marker (`python -m services.marker`) with its
garbage collector's work counted, for `benchmarks.marker --probe`.

On SIGUSR1 the process writes, to the file `BENCH_MARKER_PROBE_FILE` names, how many
collections of each generation ran so far, the objects they found unreachable, and the CPU
seconds they took (thread time between the collector's start and stop callbacks), the names
of Python's threads by OS thread id (Python 3.11 does not give them to the kernel), with a
sequence number the reader waits for. On SIGUSR2 it moves every object alive into the
permanent generation (`gc.freeze()`: the benchmark sends it once the marker is warm), and
`BENCH_MARKER_GC_THRESHOLD=N` sets generation 0's threshold: both only to measure what the
collector costs the marker, not settings of the service.
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
        # Python's threads by OS thread id: the others are the libraries' own (C++) threads.
        "threads": {t.native_id: t.name for t in threading.enumerate()},
    }
    target = Path(os.environ["BENCH_MARKER_PROBE_FILE"])
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps(figures))
    partial.replace(target)  # the reader never sees half a file


def _freeze(signum: int, frame: FrameType | None) -> None:
    gc.freeze()


if __name__ == "__main__":
    gc.callbacks.append(_on_collect)
    threshold = os.environ.get("BENCH_MARKER_GC_THRESHOLD")
    if threshold:
        gc.set_threshold(int(threshold), *gc.get_threshold()[1:])
    signal.signal(signal.SIGUSR1, _write)
    signal.signal(signal.SIGUSR2, _freeze)
    run_service("marker", main)
