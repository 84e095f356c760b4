"""A very short load test against the devstack it starts itself: the marker unlinks, the
deleter deletes, the backlog drains and the final S1/L1 check passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.load.__main__ import main


@pytest.mark.slow
def test_short_load_run_passes_its_final_check(tmp_path: Path) -> None:
    """Exit code 0, something marked in both tiers and all of it deleted, and the plot and
    the JSON record written."""
    argv = ["--brokers", "2", "--topics", "2", "--rate", "8", "--duration", "6"]
    code = main([*argv, "--drain-timeout", "30", "--out", str(tmp_path)])
    record = json.loads((tmp_path / "load-test.json").read_text())
    marked = record["figures"]["pdlis_marked"]
    assert (code, record["check"]["passed"], record["figures"]["drained"]) == (0, True, True)
    assert (marked["bookkeeper"] > 0, marked["offload"] > 0) == (True, True)
    assert (tmp_path / "load-test.png").stat().st_size > 0
