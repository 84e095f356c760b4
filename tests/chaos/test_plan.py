"""The fault plan is a function of the seed alone, so a failing run can be replayed."""

from __future__ import annotations

import random

from benchmarks.chaos.faults import KINDS, plan


def test_same_seed_same_plan_and_faults_within_the_workload() -> None:
    first, again = plan(random.Random(5), 60.0), plan(random.Random(5), 60.0)
    assert first == again
    assert [f.at for f in first] == sorted(f.at for f in first)
    assert all(0 < f.at < 60.0 and f.kind in KINDS for f in first)
    assert plan(random.Random(6), 60.0) != first


def test_every_kind_is_drawn_over_a_few_seeds() -> None:
    drawn = {f.kind for seed in range(20) for f in plan(random.Random(seed), 60.0)}
    assert drawn == set(KINDS)
