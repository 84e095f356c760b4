"""`python -m benchmarks.chaos --runs N [--seed S] [--duration SECONDS]`: N short runs on one
devstack, each with its own seeded faults; one line per run, then
`chaos: <N> runs, <F> faults, <V> violations`. Exit 0 only when V is 0 and every run did its
work: each planned fault injected, something unlinked, the backlog drained (a run that did
less checked less). `--smoke`: one short run."""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import logging
import random
import sys
from pathlib import Path

from benchmarks._truth import parse
from benchmarks.chaos.intruder import Intruder
from benchmarks.chaos.run import RunResult, one_run
from benchmarks.chaos.stack import SYSTEM_TOPIC, chaos_stack
from devstack.simulator.s3 import open_object_store
from services.metadata.zookeeper.store import ZkMetadataStore


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.chaos", description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--seed", type=int, default=None,
        help="the first run's seed (the others follow it: S, S+1, ...); random when absent",
    )  # fmt: skip
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per run")
    parser.add_argument("--record", type=Path, default=None, help="append one JSON line per run")
    args = parse(parser, {"duration": 8.0, "seed": 1}, argv)
    if args.runs < 1 or args.duration <= 0:
        parser.error("--runs and --duration must be positive")
    if args.record is not None:
        args.record.parent.mkdir(parents=True, exist_ok=True)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    return args


def line(index: int, result: RunResult) -> str:
    kinds = " ".join(f"{k}={n}" for k, n in sorted(result.faults.items())) or "none"
    text = (
        f"run {index} seed {result.seed}: faults {sum(result.faults.values())} ({kinds}); "
        f"unlinked {result.unlinked}, dead-lettered {result.dead_lettered}, "
        f"violations {len(result.violations)} [{result.seconds:.0f} s]"
    )
    if result.new_dead_letters:
        text += f"; new dead letters {dict(sorted(result.new_dead_letters.items()))}"
    if result.restarted:
        text += f"; exited by themselves: {dict(result.restarted)}"
    return text


async def campaign(args: argparse.Namespace) -> int:
    totals: collections.Counter[str] = collections.Counter()
    violations = 0
    failed: list[int] = []
    undone: list[str] = []
    async with chaos_stack() as stack:
        print(f"stack up (logs in {stack.log_dir})", flush=True)
        intruder = Intruder(stack.broker.service_url, SYSTEM_TOPIC)
        await asyncio.to_thread(intruder.subscribe_tap)
        async with (
            ZkMetadataStore.connect(stack.zookeeper.address) as store,
            open_object_store(stack.s3.client_config()) as objects,
        ):
            for index in range(args.runs):
                seed = args.seed + index
                result = await one_run(
                    stack, store, objects, intruder,
                    seed=seed, duration=args.duration, run_index=index,
                )  # fmt: skip
                totals.update(result.faults)
                violations += len(result.violations)
                print(line(index, result), flush=True)
                for error in result.fault_errors[:5]:
                    print(f"  fault not done: {error}", flush=True)
                undone += [f"run {index} (seed {seed}): {why}" for why in not_done(result)]
                if result.violations:
                    failed.append(seed)
                    for violation in result.violations[:20]:
                        print(f"  {violation}", flush=True)
                    print(
                        f"  replay: python -m benchmarks.chaos --seed {seed} --runs 1 "
                        f"--duration {args.duration:g}",
                        flush=True,
                    )
                if args.record is not None:
                    with args.record.open("a") as out:
                        out.write(json.dumps({
                            "seed": seed, "duration": args.duration,
                            "faults": dict(result.faults), "violations": result.violations,
                            "unlinked": result.unlinked, "dead_lettered": result.dead_lettered,
                            "drained": result.drained,
                            "new_dead_letters": dict(result.new_dead_letters),
                            "fault_errors": result.fault_errors,
                            "restarted": dict(result.restarted), "seconds": result.seconds,
                        }) + "\n")  # fmt: skip
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(totals.items()))
    print(f"faults by kind: {kinds}")
    if failed:
        print(f"failing seeds: {' '.join(map(str, failed))}")
    print(f"chaos: {args.runs} runs, {sum(totals.values())} faults, {violations} violations")
    for why in undone:
        print(f"benchmark failed: {why}")
    return 0 if violations == 0 and not undone else 1


def not_done(result: RunResult) -> list[str]:
    """Why a run checked less than it was planned to, if it did."""
    reasons = []
    if result.fault_errors:
        reasons.append(f"{len(result.fault_errors)} planned faults not injected")
    if not result.unlinked:
        reasons.append("nothing was unlinked, so nothing was checked for deletion")
    if not result.drained:
        reasons.append("the backlog did not drain")
    return reasons


def main(argv: list[str] | None = None) -> int:
    # The harness's own ZooKeeper client reconnects through every ZooKeeper restart and
    # logs each try with a traceback; the runs' lines are what this command reports.
    logging.getLogger("aiozk").setLevel(logging.CRITICAL)
    return asyncio.run(campaign(parse_args(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
