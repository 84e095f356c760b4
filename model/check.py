"""Check the protocol model with spin: Tombstone's rule verifies, the weaker rules fail.

`make model` runs this twice. `model/tombstone.pml` (ZooKeeper's versions, the default): every
property must verify (S1, S2 and L2 by exhaustive search, L1 as an acceptance-cycle search);
the PIP186 variant must yield an L1 counterexample, whose trail is printed; the UNPROVEN_OPEN
variant must yield an S1 counterexample. The last line is `model: <k> properties verified,
pip186 counterexample found`, and the exit status is 0 only then.

`--model oxia` checks `model/oxia.pml` (Oxia's versions: a shard-wide counter, and keys copied
by PIP-454's migration): S1, L1 and L2 must verify, and both the PIP186 and the EQ_FENCE
variant must yield an L1 counterexample. The last line is `model oxia: <k> properties
verified, pip186 and eq-fence counterexamples found`, and the exit status is 0 only then.

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
OXIA_MODEL = Path(__file__).resolve().parent / "oxia.pml"
# Safety properties are plain state-space searches; liveness ones look for acceptance cycles.
PROPERTIES = {"s1": False, "s2": False, "l1": True, "l2": True}
OXIA_PROPERTIES = ["s1", "l1", "l2"]
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


def build(workdir: Path, variant: str | None, model: Path = MODEL) -> None:
    defines = [f"-D{variant}"] if variant else []
    subprocess.run(
        ["spin", *defines, "-a", str(model)], cwd=workdir, check=True, capture_output=True
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


def trail(workdir: Path, variant: str, model: Path = MODEL) -> str:
    """The counterexample as spin replays it: each step, then the final values."""
    shutil.copy(model, workdir / model.name)
    done = subprocess.run(
        ["spin", f"-D{variant}", "-t", "-p", "-l", "-g", model.name],
        cwd=workdir,
        capture_output=True,
        text=True,
        check=False,
    )
    return "\n".join(line for line in done.stdout.splitlines() if line.strip())


def run_variant(
    variant: str | None, claims: list[str], model: Path = MODEL
) -> tuple[list[Result], Path]:
    workdir = Path(tempfile.mkdtemp(prefix="tombstone-model-"))
    build(workdir, variant, model)
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
    parser.add_argument(
        "--model",
        choices=("tombstone", "oxia"),
        default="tombstone",
        help="tombstone.pml (ZooKeeper's versions) or oxia.pml (Oxia's)",
    )
    args = parser.parse_args(argv)
    for tool in ("spin", "gcc"):
        if shutil.which(tool) is None:
            print(f"model: {tool} is not installed (scripts/bootstrap.sh installs it)")
            return 2
    if args.model == "oxia":
        return check_oxia(quiet_trail=args.quiet_trail)
    return check_tombstone(quiet_trail=args.quiet_trail)


def check_tombstone(*, quiet_trail: bool) -> int:
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
    if pip_found and not quiet_trail:
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


def check_oxia(*, quiet_trail: bool) -> int:
    """oxia.pml: Tombstone's rule verifies on Oxia's versions; PIP-186's rule and the token
    compared for equality each yield an orphan (an L1 counterexample)."""
    ours, ours_dir = run_variant(None, OXIA_PROPERTIES, OXIA_MODEL)
    for r in ours:
        verdict = "verified" if r.errors == 0 else "VIOLATED"
        print(f"oxia       {r.claim}: {verdict} ({r.states:,} states, {r.seconds:.1f} s)")
        if r.errors:
            print(trail(ours_dir, "TOMBSTONE_RULE", OXIA_MODEL))
    verified = sum(1 for r in ours if r.errors == 0)
    found = {}
    for variant, why in (
        ("PIP186", "the deleter acknowledges a listed ledger, then the marker's write unlinks it"),
        (
            "EQ_FENCE",
            "a migrated owner's version goes down and comes back to the one the marker read: "
            "its write lands after a listed ledger at another version was acknowledged",
        ),
    ):
        results, workdir = run_variant(variant, ["l1"], OXIA_MODEL)
        r = results[0]
        found[variant] = r.errors > 0
        verdict = "counterexample" if r.errors else "holds"
        print(f"oxia {variant.lower():<9} l1: {verdict} ({r.states:,} states, {r.seconds:.1f} s)")
        if r.errors and not quiet_trail:
            print(f"oxia {variant.lower()} counterexample trail ({why}: an orphan):")
            print(trail(workdir, variant, OXIA_MODEL))
    for variant, hit in found.items():
        if not hit:
            print(f"model oxia: the {variant} variant found no counterexample")
    both = all(found.values())
    tail = "counterexamples found" if both else "counterexamples NOT found"
    print(f"model oxia: {verified} properties verified, pip186 and eq-fence {tail}")
    return 0 if both and verified == len(OXIA_PROPERTIES) else 1


if __name__ == "__main__":
    sys.exit(main())
