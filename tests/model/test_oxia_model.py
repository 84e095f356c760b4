"""The fence rule on Oxia's versions (model/oxia.pml, docs/model.md "Oxia's versions"), checked
with spin as `make model` does: Tombstone's rule verifies S1, L1 and L2 when every write takes
a shard-wide counter's next value and a key copied by PIP-454's migration may start above it;
PIP-186's rule and the fence token compared for equality each yield an orphan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_oxia_model_verifies_ours_and_refutes_the_weaker_rules() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "model" / "check.py"), "--model", "oxia"],
        capture_output=True,
        text=True,
        check=False,
        timeout=560,
    )
    print(done.stdout)  # the counterexamples' trails, for the test log
    lines = done.stdout.strip().splitlines()
    expected = "model oxia: 3 properties verified, pip186 and eq-fence counterexamples found"
    assert lines[-1] == expected, done.stderr
    assert "oxia eq_fence  l1: counterexample" in done.stdout
    assert done.returncode == 0
