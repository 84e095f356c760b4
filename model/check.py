"""Check the protocol model with spin: Tombstone's rule verifies, the weaker rules fail.

`make model` runs this. For the default model every property must verify (S1, S2 and L2 by
exhaustive search, L1 as an acceptance-cycle search); the PIP186 variant must yield an L1
counterexample, whose trail is printed; the UNPROVEN_OPEN variant must yield an S1
counterexample. The last line is `model: <k> properties verified, pip186 counterexample
found`, and the exit status is 0 only then.

Every loop in the model is bounded (retries, crashes, producers), so every run is finite and
weak fairness holds on all of them; L1 is therefore searched without spin's `-f`, whose
fairness construction does not count the final stutter of a finished run as a cycle.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

MODEL = Path(__file__).resolve().parent / "tombstone.pml"
# Safety properties are plain state-space searches; liveness ones look for acceptance cycles.
PROPERTIES = {"s1": False, "s2": False, "l1": True, "l2": True}
_ERRORS = re.compile(r"errors: (\d+)")
_STORED = re.compile(r"(\d+) states, stored")


@dataclass(frozen=True)
class Result:
    variant: str
    claim: str
    errors: int
    states: int
    seconds: float
    output: str


def build(workdir: Path, variant: str | None) -> None:
    defines = [f"-D{variant}"] if variant else []
    subprocess.run(
        ["spin", *defines, "-a", str(MODEL)], cwd=workdir, check=True, capture_output=True
    )
    subprocess.run(
        ["gcc", "-O2", "-w", "-DMEMLIM=4000", "-DCOLLAPSE", "-o", "pan", "pan.c"],
        cwd=workdir,
        check=True,
        capture_output=True,
    )


def search(workdir: Path, variant: str, claim: str) -> Result:
    cycles = ["-a"] if PROPERTIES[claim] else []
    started = time.monotonic()
    done = subprocess.run(
        ["./pan", *cycles, "-N", claim, "-m200000"],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    out = done.stdout + done.stderr
    errors = _ERRORS.search(out)
    stored = _STORED.search(out)
    if errors is None:
        raise RuntimeError(f"pan gave no verdict for {variant}/{claim}:\n{out}")
    return Result(
        variant,
        claim,
        int(errors.group(1)),
        int(stored.group(1)) if stored else 0,
        time.monotonic() - started,
        out,
    )


def trail(workdir: Path, variant: str) -> str:
    """The counterexample as spin replays it: each step, then the final values."""
    shutil.copy(MODEL, workdir / MODEL.name)
    done = subprocess.run(
        ["spin", f"-D{variant}", "-t", "-p", "-l", "-g", MODEL.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    return "\n".join(line for line in done.stdout.splitlines() if line.strip())


def run_variant(variant: str | None, claims: list[str]) -> tuple[list[Result], Path]:
    workdir = Path(tempfile.mkdtemp(prefix="tombstone-model-"))
    build(workdir, variant)
    results = []
    for claim in claims:
        result = search(workdir, variant or "tombstone", claim)
        results.append(result)
        if result.errors:
            break  # keep the trail of the first counterexample
    return results, workdir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet-trail", action="store_true", help="do not print the trail")
    args = parser.parse_args(argv)
    for tool in ("spin", "gcc"):
        if shutil.which(tool) is None:
            print(f"model: {tool} is not installed (scripts/bootstrap.sh installs it)")
            return 2

    ok = True
    ours, ours_dir = run_variant(None, list(PROPERTIES))
    for r in ours:
        verdict = "verified" if r.errors == 0 else "VIOLATED"
        print(f"tombstone  {r.claim}: {verdict} ({r.states:,} states, {r.seconds:.1f} s)")
        if r.errors:
            ok = False
            print(trail(ours_dir, "TOMBSTONE_RULE"))
    verified = sum(1 for r in ours if r.errors == 0)

    pip186, pip_dir = run_variant("PIP186", ["s1", "s2", "l1"])
    pip_found = any(r.errors for r in pip186 if r.claim == "l1")
    for r in pip186:
        verdict = "counterexample" if r.errors else "holds"
        print(f"pip186     {r.claim}: {verdict} ({r.states:,} states, {r.seconds:.1f} s)")
    if pip_found and not args.quiet_trail:
        print(
            "pip186 counterexample trail (the deleter acknowledges a listed ledger, then "
            "the marker's write unlinks it: an orphan):"
        )
        print(trail(pip_dir, "PIP186"))

    unproven, _ = run_variant("UNPROVEN_OPEN", ["s1"])
    unproven_found = unproven[0].errors > 0
    print(
        f"unproven-open s1: {'counterexample' if unproven_found else 'holds'} "
        f"({unproven[0].states:,} states, {unproven[0].seconds:.1f} s)"
    )

    ok = ok and pip_found and unproven_found and verified == len(PROPERTIES)
    if not pip_found:
        print("model: the PIP186 variant found no counterexample: the model lost its teeth")
    if not unproven_found:
        print("model: the UNPROVEN_OPEN variant found no counterexample")
    tail = "pip186 counterexample found" if pip_found else "pip186 counterexample NOT found"
    print(f"model: {verified} properties verified, {tail}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
