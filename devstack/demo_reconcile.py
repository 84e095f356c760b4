"""The demo's reconciler stage: `tombstone reconcile run` on the seeded cluster, while the
services still run.

After the services' part has settled, what is left unreferenced in ZooKeeper and S3 is what
the seed planted for the reconciler. A dry run proposes it; a submit (non-interactive) sends
the candidates to the demo's marker, whose verifier and deleter pool delete them; the stage
then checks each candidate is gone. Ledgers of a neighbour cluster sharing the BookKeeper
(`devstack.neighbour`) must be neither proposed nor deleted. Both runs are the CLI an
operator runs (the command `devstack simulate` prints, `devstack.reconcile_command`), in a
child process.

The reconciler is called in one place, `reconcile()`: its flags live there.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.demo_outcome import neighbour_deleted
from devstack.neighbour import PlantedNeighbour
from devstack.reconcile_command import ReconcileTarget, reconcile_args
from devstack.reconcile_command import reconcile_env as s3_env
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import ReadBack

ROOT = Path(__file__).resolve().parents[1]
Echo = Callable[[str], None]

#: A run's own folder: `OUT/latest` once runs are versioned under `--out`, else `OUT` itself.
RUN_DIRS = ("latest", "")
#: Lines of the reconciler's standard output the demo shows (the rest is its log).
RESULT_PREFIXES = ("report:", "REFUSED", "  - ", "submitted ", "extract ")


def run_dir(out: Path) -> Path:
    """Where a run under `--out OUT` wrote its report and candidates: `OUT/latest/` when
    runs are versioned, else `OUT/`."""
    for name in RUN_DIRS:
        if (out / name / "report.html").exists():
            return out / name
    return out


def report_path(out: Path) -> Path | None:
    """`OUT/latest/report.html` or `OUT/report.html`, whichever the run wrote."""
    path = run_dir(out) / "report.html"
    return path if path.exists() else None


@dataclass
class ReconcileRun:
    """One finished reconciler run."""

    returncode: int
    output: str
    report: Path | None
    candidates: list[dict[str, Any]] = field(default_factory=list)


async def reconcile(
    target: ReconcileTarget,
    out: Path,
    env: Mapping[str, str],
    *,
    marker_address: str | None = None,
) -> ReconcileRun:
    """`tombstone reconcile run` on `target` into `out`: a dry run, or with `marker_address`
    a submit to that marker without a prompt. The demo's flags are all here (the target's
    come from `reconcile_command.reconcile_args`, as `devstack simulate` prints them)."""
    # The services' part trimmed every topic to its current ledger, and no current ledger is
    # offloaded: every object left in the bucket is a planted orphan, a 100% orphan share the
    # default limit (20%) rightly calls a likelier scan problem. Here it is the expected state.
    flags = ["--max-orphan-share", "1"]
    if marker_address:
        flags += ["--submit", "--yes", "--marker-address", marker_address]
    argv = [sys.executable, "-m", "services.cli", *reconcile_args(target, str(out), *flags)]
    child_env = {**os.environ, **env, **s3_env(target)}
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=child_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    raw, _ = await proc.communicate()
    assert proc.returncode is not None
    return ReconcileRun(
        returncode=proc.returncode,
        output=raw.decode(errors="replace"),
        report=report_path(out),
        candidates=_candidates(run_dir(out)),
    )


def _candidates(directory: Path) -> list[dict[str, Any]]:
    from services.scan.submit.send import read_candidates

    return read_candidates(directory)


def candidate_gone(candidate: Mapping[str, Any], now: ReadBack) -> bool:
    """A BookKeeper candidate's znode is gone; an offload candidate's objects are gone."""
    if candidate["ledger_type"] == "LEDGER":
        return int(candidate["ledger_id"]) not in now.ledgers
    data = f"{candidate['uuid']}-ledger-{candidate['ledger_id']}"
    return data not in now.objects and f"{data}-index" not in now.objects


@dataclass
class ReconcileSummary:
    proposed: int = 0
    submitted: int = 0
    deleted: int = 0
    reports: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    proposed_ids: set[int] = field(default_factory=set)
    """The ledger ids the dry run proposed (any tier)."""

    def render(self) -> str:
        line = (
            f"reconciler: {self.proposed} candidates proposed by the dry run, "
            f"{self.submitted} submitted, {self.deleted} deleted by the services"
        )
        reports = [f"  report: {path}" for path in self.reports]
        return "\n".join([line, *reports, *(f"  problem: {p}" for p in self.problems)])


@dataclass
class Services:
    """What the stage needs of the running services."""

    marker_address: str
    env: Mapping[str, str]
    settle: Callable[[], Awaitable[None]]
    """Returns once the deleter has drained everything submitted."""
    read_back: Callable[[], Awaitable[ReadBack]]


async def reconcile_stage(
    model: ClusterModel,
    target: ReconcileTarget,
    out: Path,
    services: Services,
    echo: Echo,
    *,
    seeded_at: float,
    neighbour: PlantedNeighbour | None = None,
) -> ReconcileSummary:
    """Dry run, then submit, then check every submitted candidate was deleted.

    `seeded_at` (time.monotonic()) is when the seed was written: the runs' short age window
    (`target.min_age`) proposes planted data only once it is that old, so the stage waits
    for that first. With `neighbour`, proposing any of its ledgers is a problem (they are
    another cluster's, in a namespace that does not exist here), and so is any of them gone
    after the submit."""
    summary = ReconcileSummary()
    window = target.min_age.total_seconds()
    wait = window + 1 - (time.monotonic() - seeded_at)
    if wait > 0:
        echo(
            f"Reconciler: waiting {wait:.0f}s until the planted data is "
            f"{window:.0f}s old (its --min-age)"
        )
        await asyncio.sleep(wait)
    echo("Reconciler dry run (`tombstone reconcile run`, a Spark job)")
    dry = await reconcile(target, out / "dry-run", services.env)
    _show(dry, echo)
    summary.proposed = len(dry.candidates)
    summary.proposed_ids = {int(c["ledger_id"]) for c in dry.candidates}
    summary.problems += _neighbour_proposed(neighbour, dry.candidates, "dry run")
    if dry.report is not None:
        summary.reports.append(dry.report)
    if dry.returncode != 0:
        summary.problems.append(f"the dry run exited with {dry.returncode}")
        return summary
    echo("Reconciler submit (`--submit` to the demo's marker)")
    sub = await reconcile(
        target, out / "submit", services.env, marker_address=services.marker_address
    )
    _show(sub, echo)
    if sub.report is not None:
        summary.reports.append(sub.report)
    if sub.returncode != 0:
        summary.problems.append(f"the submit exited with {sub.returncode}")
        return summary
    summary.submitted = len(sub.candidates)
    summary.problems += _neighbour_proposed(neighbour, sub.candidates, "submit")
    await services.settle()
    now = await services.read_back()
    kept = [c for c in sub.candidates if not candidate_gone(c, now)]
    summary.deleted = summary.submitted - len(kept)
    # A neighbour's candidate kept is the services' defence working; proposing it is already
    # reported above.
    theirs = neighbour.ledger_ids if neighbour is not None else frozenset()
    summary.problems += [
        f"candidate {c['ledger_type']} {c['ledger_id']} still there"
        for c in kept
        if int(c["ledger_id"]) not in theirs
    ][:10]
    if neighbour is not None:
        summary.problems += neighbour_deleted(neighbour, now)
    summary.problems += _planted_left(model, sub.candidates)
    return summary


def _neighbour_proposed(
    neighbour: PlantedNeighbour | None, candidates: list[dict[str, Any]], run: str
) -> list[str]:
    """The neighbour's ledgers among a run's candidates, as one problem line."""
    if neighbour is None:
        return []
    ids = sorted({int(c["ledger_id"]) for c in candidates} & neighbour.ledger_ids)
    if not ids:
        return []
    return [
        f"the {run} proposed {len(ids)} ledgers of neighbour {neighbour.cluster!r} "
        f"({', '.join(map(str, ids))}): their namespace does not exist here"
    ]


def _planted_left(model: ClusterModel, candidates: list[dict[str, Any]]) -> list[str]:
    """Planted deletable orphans the submit did not include."""
    proposed = {int(c["ledger_id"]) for c in candidates}
    return [
        f"planted {p.kind.value} {p.ledger_id} not proposed"
        for p in model.planted
        if p.deletable and p.ledger_id is not None and p.ledger_id not in proposed
    ]


def _show(run: ReconcileRun, echo: Echo) -> None:
    lines = [
        line
        for line in run.output.splitlines()
        if line.startswith(RESULT_PREFIXES) or "deletion candidates" in line
    ]
    if run.returncode not in (0, 3):
        lines += run.output.strip().splitlines()[-15:]
    for line in lines:
        echo(f"  {line}")
