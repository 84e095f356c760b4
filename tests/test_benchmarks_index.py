"""`python -m benchmarks` (what `make bench` runs) lists every benchmark module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_listing_names_every_benchmark() -> None:
    """Each public benchmark module or package appears in the listing with its summary."""
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    modules = {
        p.stem if p.is_file() else p.name
        for p in (ROOT / "benchmarks").iterdir()
        if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    listed = {line.split()[0] for line in result.stdout.splitlines()[1:] if line.strip()}
    assert modules == listed


def test_unknown_benchmark_is_refused() -> None:
    """A misspelt name exits 2 and says which names exist."""
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "no-such"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "known:" in result.stderr
