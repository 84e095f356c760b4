"""Versioned run folders under one --out, and what --submit, --yes and --plan check before
any Spark work (no Spark here: run folders are written as the analysis writes them)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from services.core.config import ClientConfig
from services.scan.cli.options import SubmitRequest, submit_candidates
from services.scan.cli.reconcile import reconcile
from services.scan.cli.runs import LATEST, complete_run, start_run, update_latest
from services.scan.report.history import INCOMPLETE
from services.scan.submit.plan import PlanRefused, read_plan, select
from services.scan.submit.send import SubmitSettings
from tests.scan import report_fixture as R

NOW = datetime(2026, 11, 26, 21, 0, 5, 750_000, tzinfo=UTC)
U1 = "11111111-1111-1111-1111-111111111111"


def finished(run_dir: Path, body: dict[str, Any] | None = None) -> Path:
    """A run folder as a finished analysis leaves it (summary, candidates 101 and 102)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "summary.json").write_text(json.dumps(body or R.summary()))
    R.write_candidates(run_dir, [101, 102])
    return run_dir


def test_a_run_gets_its_own_folder_marked_incomplete(tmp_path: Path) -> None:
    """The folder is named by the UTC second; INCOMPLETE is there from the start, and the
    run records the newest complete run before it."""
    first = start_run(tmp_path, NOW)
    finished(first.path)
    complete_run(first)
    second = start_run(tmp_path, NOW.replace(minute=5))
    assert (first.run_id, first.previous_id) == ("20261126T210005Z", None)
    assert (second.ids(), (second.path / INCOMPLETE).is_file()) == (
        {"run_id": "20261126T210505Z", "previous_run_id": "20261126T210005Z"},
        True,
    )


def test_a_taken_name_is_never_reused(tmp_path: Path) -> None:
    """Two runs in the same second: the second takes the next free second."""
    names = [start_run(tmp_path, NOW).run_id for _ in range(3)]
    assert names == ["20261126T210005Z", "20261126T210006Z", "20261126T210007Z"]


def test_latest_points_at_the_newest_complete_run(tmp_path: Path) -> None:
    """`latest` is a relative symlink; an incomplete newer run does not move it, and a run
    completing late does not move it back to an older one."""
    old = start_run(tmp_path, NOW)
    newer = start_run(tmp_path, NOW.replace(minute=1))
    newest = start_run(tmp_path, NOW.replace(minute=2))
    finished(newer.path)
    complete_run(newer)
    after_newer = os.readlink(tmp_path / LATEST)
    finished(old.path)
    complete_run(old)
    assert (after_newer, os.readlink(tmp_path / LATEST)) == (newer.run_id, newer.run_id)
    assert [(p / INCOMPLETE).exists() for p in (old.path, newer.path, newest.path)] == [
        False,
        False,
        True,
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [old.run_id, newer.run_id, newest.run_id, LATEST]
    )


def test_no_complete_run_means_no_latest(tmp_path: Path) -> None:
    start_run(tmp_path, NOW)
    assert (update_latest(tmp_path), (tmp_path / LATEST).exists()) == (None, False)


def test_an_old_unversioned_run_is_left_as_it_is(tmp_path: Path) -> None:
    """Files of a run written straight into --out stay; the new run goes beside them and is
    not compared with them."""
    finished(tmp_path)
    (tmp_path / "submitted.json").write_text("{}")
    before = sorted(p.name for p in tmp_path.iterdir())
    run = start_run(tmp_path, NOW)
    finished(run.path)
    complete_run(run)
    after = sorted(p.name for p in tmp_path.iterdir())
    assert (after, run.previous_id) == (sorted([*before, run.run_id, LATEST]), None)
    assert not (run.path / "submitted.json").exists()


# --plan: what may serve as a plan


def test_a_complete_dry_run_is_a_plan(tmp_path: Path) -> None:
    plan = read_plan(finished(tmp_path / R.RUN), "c1")
    assert (plan.run_id, plan.keys) == (
        R.RUN,
        frozenset({("LEDGER", 101, ""), ("LEDGER", 102, "")}),
    )


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("incomplete", "is incomplete"),
        ("other_cluster", "is a run of cluster 'c1', not 'c2'"),
        ("refused", "was refused"),
        ("submitted", "already submitted"),
        ("no_summary", "no readable summary.json"),
        ("missing", "is not a run folder"),
    ],
)
def test_a_folder_that_cannot_be_a_plan_is_refused(tmp_path: Path, change: str, why: str) -> None:
    run = finished(tmp_path / R.RUN)
    cluster = "c2" if change == "other_cluster" else "c1"
    if change == "incomplete":
        (run / INCOMPLETE).write_text("")
    elif change == "refused":
        (run / "summary.json").write_text(json.dumps(R.refused_summary()))
    elif change == "submitted":
        (run / "submitted.json").write_text("{}")
    elif change == "no_summary":
        (run / "summary.json").unlink()
    elif change == "missing":
        run = tmp_path / "nothing"
    with pytest.raises(PlanRefused, match=why):
        read_plan(run, cluster)


def write_findings(run_dir: Path) -> None:
    """Fresh findings: ledger 102 referenced again; the planned upload of ledger 7 has one
    object still too young."""
    ledgers = run_dir / "findings" / "ledgers"
    ledgers.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "ledger_id": pa.array([101, 102, 103], pa.int64()),
                "kind": ["topic_gone", "referenced", "topic_gone"],
                "orphan_reason": [None, None, None],
                "deletable": [True, False, True],
            }
        ),
        ledgers / "part-0.parquet",
    )
    objects = run_dir / "findings" / "objects"
    objects.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "ledger_id": pa.array([7, 7], pa.int64()),
                "uuid": [U1, U1],
                "kind": ["offload_no_match", "too_young"],
                "orphan_reason": [None, "offload_no_match"],
                "deletable": [True, False],
            }
        ),
        objects / "part-0.parquet",
    )


def cand(ledger_id: int, ledger_type: str = "LEDGER", uuid: str | None = None) -> dict[str, Any]:
    return {"ledger_type": ledger_type, "ledger_id": ledger_id, "uuid": uuid, "size_bytes": 10}


def test_only_planned_candidates_still_proposed_are_sent(tmp_path: Path) -> None:
    """Plan {101, 102, 104, upload 7}; fresh candidates {101, 103}: 101 is sent; 103 (not
    reviewed) is only counted; 102, 104 and the upload are listed with what they are now."""
    plan_dir = tmp_path / R.PREVIOUS
    finished(plan_dir)
    keys = [("LEDGER", 101, ""), ("LEDGER", 102, ""), ("LEDGER", 104, "")]
    keys.append(("OFFLOAD_LEDGER", 7, U1))
    pq.write_table(
        pa.table(
            {
                "ledger_type": [k[0] for k in keys],
                "ledger_id": pa.array([k[1] for k in keys], pa.int64()),
                "uuid": [k[2] or None for k in keys],
            }
        ),
        plan_dir / "candidates" / "part-0.parquet",
    )
    run = tmp_path / R.RUN
    write_findings(run)
    selection = select(read_plan(plan_dir, "c1"), [cand(101), cand(103)], run)
    assert ([c["ledger_id"] for c in selection.send], selection.outside_plan) == ([101], 1)
    assert [(s["ledger_id"], s["kind"], s["reason"]) for s in selection.no_longer] == [
        (102, "referenced", ""),
        (104, "gone", "not found by the fresh scan"),
        (7, "too_young", "offload_no_match"),
    ]
    assert selection.record()["plan"] | {"path": ""} == {
        "run_id": R.PREVIOUS,
        "path": "",
        "planned": 4,
        "sent": 1,
        "no_longer_candidates": 3,
        "outside_plan": 1,
    }


# The command line: checked before any Spark work, one line each.


def analyze_args(tmp_path: Path, *extra: str) -> list[str]:
    args = ["analyze", "--extract", str(tmp_path / "x"), "--out", str(tmp_path / "out")]
    return [*args, "--cluster", "c1", *extra]


def test_submit_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    """stdin is not a terminal here: one line naming --yes, exit 2, no run folder."""
    result = CliRunner().invoke(reconcile, analyze_args(tmp_path, "--submit"))
    lines = result.output.strip().splitlines()
    assert (result.exit_code, len(lines), "--yes" in lines[0]) == (2, 1, True)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["run", "analyze"])
def test_plan_is_checked_before_any_work(tmp_path: Path, command: str) -> None:
    """An incomplete plan folder is refused in one line (exit 2), no run folder made."""
    plan = finished(tmp_path / R.PREVIOUS)
    (plan / INCOMPLETE).write_text("")
    args = analyze_args(tmp_path, "--submit", "--yes", "--plan", str(plan))
    if command == "run":
        args = ["run", "--zookeeper", "127.0.0.1:1", *args[3:]]
    result = CliRunner().invoke(reconcile, args)
    lines = result.output.strip().splitlines()
    assert (result.exit_code, len(lines)) == (2, 1), result.output
    assert ("--plan refused" in lines[0], "incomplete" in lines[0]) == (True, True)
    assert not (tmp_path / "out").exists()


def test_plan_without_submit_is_a_usage_error(tmp_path: Path) -> None:
    plan = finished(tmp_path / R.PREVIOUS)
    result = CliRunner().invoke(reconcile, analyze_args(tmp_path, "--plan", str(plan)))
    assert (result.exit_code, "--plan only applies with --submit" in result.output) == (2, True)


def _run_with_candidates(tmp_path: Path) -> Any:
    run = start_run(tmp_path / "out", NOW)
    (run.path / "summary.json").write_text(json.dumps(R.summary()))
    pq.write_table(
        pa.table(
            {
                "ledger_type": ["LEDGER", "LEDGER"],
                "ledger_id": pa.array([101, 102], pa.int64()),
                "uuid": pa.array([None, None], pa.string()),
                "size_bytes": pa.array([3 * R.MIB, R.MIB], pa.int64()),
            }
        ),
        (run.path / "candidates.parquet"),
    )
    (run.path / "candidates").mkdir()
    (run.path / "candidates.parquet").rename(run.path / "candidates" / "part-0.parquet")
    return run


def test_the_submit_is_asked_for_and_a_no_sends_nothing(tmp_path: Path) -> None:
    """Without --yes the question names the count, size, cluster and marker; the default
    is no: nothing sent, the run stays a dry run (and can serve as a plan)."""
    run = _run_with_candidates(tmp_path)
    settings = SubmitSettings(marker=ClientConfig("127.0.0.1:1"))
    request = SubmitRequest(settings, assume_yes=False, plan=None)
    statuses: list[int] = []

    @click.command()
    def ask() -> None:
        statuses.append(submit_candidates(run, request, cluster="c1"))

    result = CliRunner().invoke(ask, input="\n")
    summary = json.loads((run.path / "summary.json").read_text())
    assert (
        "Submit 2 candidates (4.0 MiB) of cluster c1 to the marker at 127.0.0.1:1? [y/N]"
        in result.output
    )
    assert (statuses, (run.path / "submitted.json").exists(), summary["dry_run"]) == (
        [0],
        False,
        True,
    )
    complete_run(run)
    assert read_plan(run.path, "c1").run_id == run.run_id


def test_a_plan_left_with_nothing_to_send_records_why(tmp_path: Path) -> None:
    """Every planned candidate gone: no call, no question; submitted.json, the report and
    stdout say what the plan held and why nothing went."""
    plan_dir = finished(tmp_path / "plans" / R.PREVIOUS)
    run = _run_with_candidates(tmp_path)
    write_findings(run.path)
    pq.write_table(
        pa.table(
            {
                "ledger_type": ["LEDGER"],
                "ledger_id": pa.array([103], pa.int64()),
                "uuid": pa.array([None], pa.string()),
                "size_bytes": pa.array([1], pa.int64()),
            }
        ),
        run.path / "candidates" / "part-0.parquet",
    )
    (plan_dir / "candidates" / "part-0.parquet").unlink()
    pq.write_table(
        pa.table(
            {
                "ledger_type": ["LEDGER"],
                "ledger_id": pa.array([102], pa.int64()),
                "uuid": pa.array([None], pa.string()),
            }
        ),
        plan_dir / "candidates" / "part-0.parquet",
    )
    settings = SubmitSettings(marker=ClientConfig("127.0.0.1:1"))
    request = SubmitRequest(settings, assume_yes=False, plan=read_plan(plan_dir, "c1"))
    statuses: list[int] = []

    @click.command()
    def apply() -> None:
        statuses.append(submit_candidates(run, request, cluster="c1"))

    result = CliRunner().invoke(apply)
    record = json.loads((run.path / "submitted.json").read_text())
    page = (run.path / "report.html").read_text()
    assert (statuses, record["calls"], record["plan"]["sent"]) == ([0], 0, 0)
    assert "0 of 1 planned candidates still proposed; 1 no longer candidates" in result.output
    assert "1 new candidates outside the plan (not sent)" in result.output
    assert [(n["ledger_id"], n["kind"]) for n in record["no_longer_candidates"]] == [
        (102, "referenced")
    ]
    assert "Planned, no longer candidates (not sent) (1)" in page
    assert f"Submitted from the plan <code>{R.PREVIOUS}</code>" in page
