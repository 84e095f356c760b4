"""The previous run in the same `--out` history, and what changed since.

Runs live in `OUT/<UTC timestamp YYYYmmddTHHMMSSZ>/`; a run still being written (or cut
short) holds a file `INCOMPLETE`. The previous run of a run is the newest *older* sibling
with a `summary.json` and no `INCOMPLETE`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.scan import parquet_files

RUN_NAME = re.compile(r"^\d{8}T\d{6}Z$")
INCOMPLETE = "INCOMPLETE"
SUMMARY = "summary.json"
CANDIDATES = "candidates"
#: Example ids listed per change (the counts are always complete).
EXAMPLES = 10


def is_complete_run(path: Path) -> bool:
    return (
        RUN_NAME.match(path.name) is not None
        and path.is_dir()
        and not path.is_symlink()
        and (path / SUMMARY).is_file()
        and not (path / INCOMPLETE).exists()
    )


def previous_run(run_dir: Path) -> Path | None:
    """The newest complete run folder beside `run_dir` and older than it (None outside a
    versioned `--out`, or for the first run)."""
    run_dir = Path(run_dir)
    if RUN_NAME.match(run_dir.name) is None or not run_dir.parent.is_dir():
        return None
    older = [p for p in run_dir.parent.iterdir() if p.name < run_dir.name and is_complete_run(p)]
    return max(older, key=lambda p: p.name, default=None)


def named_previous_run(run_dir: Path, summary: Mapping[str, Any]) -> Path | None:
    """The run `previous_run_id` names when it is a complete sibling, else `previous_run`."""
    named = summary.get("previous_run_id")
    if isinstance(named, str) and RUN_NAME.match(named):
        candidate = Path(run_dir).parent / named
        if is_complete_run(candidate):
            return candidate
    return previous_run(Path(run_dir))


CandidateKey = tuple[str, int, str]


def candidate_keys(run_dir: Path) -> set[CandidateKey] | None:
    """(ledger type, ledger id, uuid) of every candidate a run wrote; None when unreadable."""
    path = Path(run_dir) / CANDIDATES
    if not path.is_dir():
        return None
    try:
        found = parquet_files.rows(path, columns=["ledger_type", "ledger_id", "uuid"])
    except (OSError, ValueError):
        return None
    return {(row["ledger_type"], row["ledger_id"], row["uuid"] or "") for row in found}


@dataclass
class RunDiff:
    previous_id: str
    previous: Mapping[str, Any]
    kinds: list[dict[str, Any]] = field(default_factory=list)
    """(source, kind, before, now) for every kind whose count changed."""
    new: list[CandidateKey] | None = None
    gone: list[CandidateKey] | None = None
    kept: int = 0


def _kind_counts(summary: Mapping[str, Any]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for row in summary.get("counts", []):
        key = (str(row["source"]), str(row["kind"]))
        counts[key] = counts.get(key, 0) + int(row["count"])
    return counts


def diff_runs(run_dir: Path, summary: Mapping[str, Any]) -> RunDiff | None:
    """What changed since the previous run (None when there is none)."""
    previous = named_previous_run(run_dir, summary)
    if previous is None:
        return None
    try:
        before = json.loads((previous / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    diff = RunDiff(previous.name, before)
    old, now = _kind_counts(before), _kind_counts(summary)
    for key in sorted(old.keys() | now.keys()):
        if old.get(key, 0) != now.get(key, 0):
            source, kind = key
            diff.kinds.append(
                {"source": source, "kind": kind, "before": old.get(key, 0), "now": now.get(key, 0)}
            )
    old_keys, new_keys = candidate_keys(previous), candidate_keys(Path(run_dir))
    if old_keys is not None and new_keys is not None:
        diff.new = sorted(new_keys - old_keys)
        diff.gone = sorted(old_keys - new_keys)
        diff.kept = len(new_keys & old_keys)
    return diff
