"""`python -m sim`: run seeds, replay one, or hunt the mutants (docs/simulation.md).

python -m sim --seeds 2000            # ends with `sim: 2000 seeds, <V> violations`
python -m sim --seed 17               # replay one seed: its full trace, then the verdict
python -m sim --mutants               # ends with `mutants: <found>/<total> found`
python -m sim --seeds 100000 --summary out.txt   # the long campaign
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence

from sim.mutants import MUTANTS
from sim.run import run_seed

MUTANT_BUDGETS = dict.fromkeys(MUTANTS, 500)
"""Seeds each mutant may take before the hunt counts it as not found."""


def _one(args: tuple[int, str | None]) -> tuple[int, list[str], str]:
    seed, mutant = args
    try:
        result = run_seed(seed, mutant)
    except Exception:
        # A crash of the harness itself is reported like a violation, with its traceback.
        return seed, ["harness"], f"seed {seed}: the harness failed\n{traceback.format_exc()}"

    return (
        seed,
        [v.invariant for v in result.violations],
        result.report() if result.violations else "",
    )


def _results(
    seeds: Sequence[int], mutant: str | None, workers: int
) -> Iterator[tuple[int, list[str], str]]:
    jobs = [(seed, mutant) for seed in seeds]
    if workers <= 1:
        yield from map(_one, jobs)
        return
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        yield from pool.imap(_one, jobs, chunksize=16)


def run_many(
    first: int, count: int, workers: int, summary: str | None, mutant: str | None = None
) -> int:
    started = time.perf_counter()
    violations = 0
    failing: list[int] = []
    for seed, invariants, report in _results(range(first, first + count), mutant, workers):
        if invariants:
            violations += len(invariants)
            failing.append(seed)
            print(report, flush=True)
    elapsed = time.perf_counter() - started
    rate = count / elapsed * 60 if elapsed > 0 else 0.0
    print(f"rate: {rate:.0f} seeds/min ({elapsed:.1f} s, {workers} workers)")
    line = f"sim: {count} seeds, {violations} violations"
    if summary:
        with open(summary, "w", encoding="utf-8") as out:
            out.write(f"{line}\nrate: {rate:.0f} seeds/min\nfailing seeds: {failing}\n")
    print(line)
    return 0 if violations == 0 else 1


def replay(seed: int, mutant: str | None) -> int:
    result = run_seed(seed, mutant)
    sys.stdout.write(result.trace_bytes().decode() + "\n")
    if result.violations:
        print(result.report())
    print(f"sim: 1 seeds, {len(result.violations)} violations")
    return 0 if not result.violations else 1


def hunt(names: Sequence[str], workers: int) -> int:
    found = 0
    for name in names:
        budget = MUTANT_BUDGETS[name]
        hit = find_mutant(name, budget, workers)
        if hit is None:
            print(f"mutant {name}: NOT found in {budget} seeds")
        else:
            seed, invariants = hit
            found += 1
            print(f"mutant {name}: found by seed {seed} ({seed + 1} seeds) as {invariants[0]}")
    print(f"mutants: {found}/{len(names)} found")
    return 0 if found == len(names) else 1


def find_mutant(name: str, budget: int, workers: int = 1) -> tuple[int, list[str]] | None:
    """The first seed (from 0) whose run with mutant `name` violates an invariant. A crash of
    the harness itself finds nothing: a mutant that broke the harness (a stale swap after a
    signature change) would otherwise pass for found."""
    for seed, invariants, _ in _results(range(budget), name, workers):
        checked = [i for i in invariants if i != "harness"]
        if checked:
            return seed, checked
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sim", description=__doc__)
    parser.add_argument("--seeds", type=int, default=2000, help="how many seeds to run")
    parser.add_argument("--first", type=int, default=0, help="the first seed of the slice")
    parser.add_argument("--seed", type=int, help="replay this one seed and print its trace")
    parser.add_argument("--mutant", choices=sorted(MUTANTS), help="switch this planted bug on")
    parser.add_argument("--mutants", action="store_true", help="hunt every planted bug")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--summary", help="also write the final lines to this file")
    args = parser.parse_args(argv)
    if args.seed is not None:
        return replay(args.seed, args.mutant)
    if args.mutants:
        return hunt([args.mutant] if args.mutant else list(MUTANTS), args.workers)
    # With --mutant, a slice of seeds runs with that bug planted (each failing seed reported).
    return run_many(args.first, args.seeds, args.workers, args.summary, args.mutant)


if __name__ == "__main__":
    sys.exit(main())
