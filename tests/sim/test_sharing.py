"""The second cluster sharing our ledgers root and the shadows created at any time are not
vacuous: over a few seeds, every "whose owner?" rule answers some PDLI, the neighbour's
ledgers are forged and offered to the reconciler, and a verdict waits for a shadow scan that
started after its ledger left the source's list (docs/simulation.md)."""

from __future__ import annotations

import functools

from sim.run import run_seed

SEEDS = range(6)


@functools.cache
def _lines() -> tuple[str, ...]:
    out: list[str] = []
    for seed in SEEDS:
        result = run_seed(seed)
        assert result.violations == [], seed
        out.extend(result.trace)
    return tuple(out)


def test_every_whose_owner_rule_answers() -> None:
    foreign = {
        line.split("SKIP FOREIGN (")[1].split(")")[0]
        for line in _lines()
        if "SKIP FOREIGN (" in line
    }
    assert {
        "other_cluster",
        "owner_in_cluster",
        "owner_shared",
        "replicated_undeclared",
        "namespace_unknown",
        "referenced_by_cluster",
    } <= foreign


def test_the_neighbours_ledgers_are_forged_and_reconciled_under_both_names() -> None:
    lines = _lines()
    assert any("of east as sim " in line for line in lines)
    assert any("of east as east " in line for line in lines)
    assert any("reconciler (" in line and " of east: sent" in line for line in lines)
    assert any("shares the ledgers root (declared)" in line for line in lines)
    assert any("shares the ledgers root (undeclared)" in line for line in lines)


def test_a_shadow_created_after_a_trim_makes_its_verdicts_wait_for_a_fresh_scan() -> None:
    lines = _lines()
    assert any("creates shadow topic" in line for line in lines)
    assert any("(shadow_view_stale)" in line for line in lines)
