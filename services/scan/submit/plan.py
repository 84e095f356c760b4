"""`--submit --plan RUN_DIR`: submit only what an earlier dry run proposed, re-verified.

The operator reviews a dry run's report, then submits with `--plan` pointing at it. The new
run extracts and analyses afresh as usual (that is the re-verification); only the candidates
found both in the plan and in the fresh analysis are sent. A plan item the fresh analysis no
longer proposes is not sent and is listed with what it is now (referenced again, too young,
gone...); a fresh candidate outside the plan is not sent either (only counted): nobody
reviewed it. A candidate is identified by (ledger type, ledger id, uuid), as in
`report.history.candidate_keys`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.scan.report.history import (
    INCOMPLETE,
    SUMMARY,
    CandidateKey,
    candidate_keys,
)

SUBMITTED = "submitted.json"
FINDINGS_LEDGERS = "findings/ledgers"
FINDINGS_OBJECTS = "findings/objects"


class PlanRefused(ValueError):
    """The folder given to `--plan` cannot serve as a plan (the message says why)."""


@dataclass(frozen=True)
class Plan:
    path: Path
    run_id: str
    keys: frozenset[CandidateKey]


@dataclass
class Selection:
    """The fresh candidates split by the plan."""

    plan: Plan
    send: list[dict[str, Any]] = field(default_factory=list)
    outside_plan: int = 0
    no_longer: list[dict[str, Any]] = field(default_factory=list)
    """Plan items the fresh analysis does not propose, with their current kind and reason."""

    def record(self) -> dict[str, Any]:
        """What submitted.json keeps of the plan."""
        return {
            "plan": {
                "run_id": self.plan.run_id,
                "path": str(self.plan.path),
                "planned": len(self.plan.keys),
                "sent": len(self.send),
                "no_longer_candidates": len(self.no_longer),
                "outside_plan": self.outside_plan,
            },
            "no_longer_candidates": self.no_longer,
        }


def key_of(candidate: dict[str, Any]) -> CandidateKey:
    return (candidate["ledger_type"], candidate["ledger_id"], candidate["uuid"] or "")


def read_plan(plan_dir: str | Path, cluster: str) -> Plan:
    """The candidate set of a complete, allowed dry run of `cluster`; PlanRefused otherwise."""
    path = Path(plan_dir)
    name = str(path)
    if not path.is_dir():
        raise PlanRefused(f"{name} is not a run folder")
    if (path / INCOMPLETE).exists():
        raise PlanRefused(f"{name} is incomplete (it failed or was interrupted)")
    try:
        summary = json.loads((path / SUMMARY).read_text())
    except (OSError, ValueError):
        raise PlanRefused(f"{name} holds no readable {SUMMARY}: not a finished run") from None
    planned_cluster = summary.get("config", {}).get("cluster")
    if planned_cluster != cluster:
        raise PlanRefused(f"{name} is a run of cluster {planned_cluster!r}, not {cluster!r}")
    if summary.get("refused"):
        raise PlanRefused(f"{name} was refused: it proposes nothing")
    if summary.get("dry_run") is False or (path / SUBMITTED).exists():
        raise PlanRefused(f"{name} already submitted; a plan is a dry run")
    keys = candidate_keys(path)
    if keys is None:
        raise PlanRefused(f"{name} holds no readable candidates")
    return Plan(path.resolve(), path.resolve().name, frozenset(keys))


def select(plan: Plan, candidates: Sequence[dict[str, Any]], run_dir: Path) -> Selection:
    """Split the fresh candidates of `run_dir` by the plan; explain the plan items left out."""
    selection = Selection(plan)
    fresh = set()
    for candidate in candidates:
        key = key_of(candidate)
        fresh.add(key)
        if key in plan.keys:
            selection.send.append(candidate)
        else:
            selection.outside_plan += 1
    missing = sorted(plan.keys - fresh)
    selection.no_longer = current_status(run_dir, missing)
    return selection


def current_status(run_dir: Path, keys: Sequence[CandidateKey]) -> list[dict[str, Any]]:
    """What the fresh findings say of each key: kind and reason, or "gone" when the ledger
    or upload was not found any more."""
    ledger_ids = [i for t, i, _ in keys if t == "LEDGER"]
    offloads = [(i, u) for t, i, u in keys if t != "LEDGER"]
    ledgers = _rows(run_dir / FINDINGS_LEDGERS, ledger_ids)
    objects = _rows(run_dir / FINDINGS_OBJECTS, [i for i, _ in offloads])
    by_ledger = {row["ledger_id"]: row for row in ledgers}
    by_upload: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in objects:
        by_upload.setdefault((row["ledger_id"], (row["uuid"] or "").lower()), []).append(row)
    status = []
    for ledger_type, ledger_id, uuid in keys:
        if ledger_type == "LEDGER":
            found = by_ledger.get(ledger_id)
            rows = [found] if found else []
        else:
            rows = by_upload.get((ledger_id, uuid.lower()), [])
        # An upload is proposed only when all its objects are: the ones holding it back.
        held = [r for r in rows if not r["deletable"]] or rows
        status.append(
            {
                "ledger_type": ledger_type,
                "ledger_id": ledger_id,
                "uuid": uuid,
                "kind": _joined(r["kind"] for r in held) or "gone",
                "reason": _joined(r["orphan_reason"] for r in held)
                or ("" if held else "not found by the fresh scan"),
            }
        )
    return status


def _joined(values: Any) -> str:
    return ", ".join(sorted({str(v) for v in values if v}))


def _rows(path: Path, ledger_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The findings rows of `ledger_ids` (read on the driver: a plan is reviewed by a person,
    so it is small; the filter is pushed down to the Parquet row groups)."""
    if not ledger_ids or not path.is_dir():
        return []
    import pyarrow.parquet as pq

    table = pq.read_table(path, filters=[("ledger_id", "in", sorted(set(ledger_ids)))])
    wanted = ("ledger_id", "uuid", "kind", "orphan_reason", "deletable")
    present = [c for c in wanted if c in table.column_names]
    return [{c: row.get(c) for c in wanted} for row in table.select(present).to_pylist()]
