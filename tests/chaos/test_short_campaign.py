"""Two short chaos runs on the devstack with a fixed seed: marker, verifier and deleter kills,
a broker restart, ZooKeeper restart and session expiry, duplicate and forged PDLIs (seed 77
draws all of these); every run must end with S1, S2 and L1 holding."""

from __future__ import annotations

import pytest

from benchmarks.chaos.__main__ import main


@pytest.mark.slow
def test_two_short_runs_end_without_violations(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--runs", "2", "--seed", "77", "--duration", "25"])
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("chaos: 2 runs, "), out
    assert last.endswith(" 0 violations"), out
    assert code == 0, out
    assert [w for w in ("seed 77", "seed 78") if f"{w}:" in out] == ["seed 77", "seed 78"]
