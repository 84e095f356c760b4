"""`make bench-smoke`: every benchmark runs at its tiny size and its work happens.

CI runs this module inside the suite (second, being one of the two slowest files:
`tests/conftest.py`), so it overlaps the other worker's files instead of adding its whole
time after the suite. A benchmark fails its smoke run when it no longer starts, or when the
work it measures did not happen (`benchmarks._truth.UndoneWork`), the reason on its last line.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.__main__ import SMOKE, _benchmarks, smoke_command, smoke_runs

ROOT = Path(__file__).resolve().parents[1]
#: A smoke run is seconds when the machine is idle; a loaded two-core machine stretches the
#: Spark ones to minutes. Past this, something hangs.
TIMEOUT_S = 900


def test_every_listed_benchmark_has_a_smoke_run() -> None:
    """A new benchmark cannot be left out of `make bench-smoke`."""
    assert sorted(SMOKE) == sorted(_benchmarks())


def test_every_smoke_run_is_in_exactly_one_process() -> None:
    """Grouping smoke runs into one process neither drops nor repeats one."""
    assert sorted(n for run in smoke_runs() for n in run) == sorted(SMOKE)
    assert smoke_runs(["reconcile_analyze"]) == [("reconcile_analyze",)]


@pytest.mark.slow
@pytest.mark.parametrize("names", smoke_runs(), ids="+".join)
def test_benchmark_smoke_run(names: tuple[str, ...]) -> None:
    result = subprocess.run(
        smoke_command(names), cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:]
    label = "+".join(names)
    assert result.returncode == 0, f"{label} --smoke exited {result.returncode}: {last}"
