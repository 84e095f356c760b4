"""The demo's reconciler stage: where it finds a run's report, and when a candidate counts as
deleted. (The stage itself runs in `tests/devstack_sim/test_cli.py::test_demo_runs_end_to_end`.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.demo_reconcile import ReconcileSummary, candidate_gone, report_path, run_dir
from devstack.simulator.readback import ReadBack


def _write_run(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    report = directory / "report.html"
    report.write_text("<html></html>")
    return report


@pytest.mark.parametrize("layout", ["latest", ""], ids=["versioned", "flat"])
def test_report_is_found_in_either_output_layout(tmp_path: Path, layout: str) -> None:
    """`OUT/latest/report.html` (runs versioned under --out) and `OUT/report.html` both."""
    report = _write_run(tmp_path / layout)
    assert report_path(tmp_path) == report
    assert run_dir(tmp_path) == report.parent


def test_no_report_is_none(tmp_path: Path) -> None:
    """A run that wrote no report (it failed early): None, not a path that does not exist."""
    assert report_path(tmp_path) is None
    assert run_dir(tmp_path) == tmp_path


def test_a_ledger_candidate_is_gone_when_its_znode_is() -> None:
    candidate = {"ledger_type": "LEDGER", "ledger_id": 7, "uuid": None}
    assert candidate_gone(candidate, ReadBack())
    assert not candidate_gone(candidate, ReadBack(ledgers={7: None}))  # type: ignore[dict-item]


def test_an_offload_candidate_is_gone_when_both_objects_are() -> None:
    """Either object of the pair still there (data or index) means not deleted."""
    candidate = {"ledger_type": "OFFLOAD_LEDGER", "ledger_id": 43, "uuid": "u-1"}
    assert candidate_gone(candidate, ReadBack(objects={"u-2-ledger-43": {}}))
    for key in ("u-1-ledger-43", "u-1-ledger-43-index"):
        assert not candidate_gone(candidate, ReadBack(objects={key: {}}))


def test_summary_names_the_reports_and_problems() -> None:
    summary = ReconcileSummary(3, 3, 2, [Path("/o/dry-run/report.html")], ["candidate x"])
    assert summary.render().splitlines() == [
        "reconciler: 3 candidates proposed by the dry run, 3 submitted, 2 deleted by the services",
        "  report: /o/dry-run/report.html",
        "  problem: candidate x",
    ]
