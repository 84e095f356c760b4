"""`python -m benchmarks` lists the benchmarks; `python -m benchmarks NAME [ARGS]` runs one;
`python -m benchmarks smoke [NAME ...]` runs them (or those named) at their tiny size;
`python -m benchmarks together NAME ...` runs the named smoke runs in one process.

Each benchmark is its own module with its own options (`python -m benchmarks NAME --help`),
and prints its figures beside the raw client's, measured in the same run. Each fails (a
non-zero exit and a line saying why) when the work it measures did not happen.
"""

from __future__ import annotations

import ast
import runpy
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: How `make bench-smoke` runs each benchmark: seconds each, every check on, figures
#: meaningless. A benchmark missing here fails tests/test_bench_smoke.py.
SMOKE: dict[str, tuple[str, ...]] = {
    "believed": ("--smoke",),
    "chaos": ("--smoke",),
    "core_rpc": ("--smoke",),
    "deleter": ("--smoke",),
    "follower": ("--smoke",),
    "load": ("--smoke",),
    "marker": ("--smoke",),
    "metadata_read": ("--smoke",),
    "oxia_store": ("--smoke",),
    "pulsar_broker": ("--smoke",),
    "reconcile_analyze": ("--smoke",),
    "reconcile_extract": ("--smoke",),
    "shadow_scan": ("--smoke",),
    "simulator_write": ("--smoke",),
    "verifier": ("--smoke",),
}


#: Smoke runs that share one process, in this order. Both Spark benchmarks start a driver
#: JVM, and PySpark keeps it when a session stops: the second reuses the first's, already
#: started and warmed up, instead of paying both again. Measured runs each start their own.
SMOKE_TOGETHER: tuple[tuple[str, ...], ...] = (("reconcile_extract", "reconcile_analyze"),)


def _benchmarks() -> dict[str, str]:
    """Module name -> the first line of its docstring, for every benchmark in this package."""
    found: dict[str, str] = {}
    for path in sorted(HERE.iterdir()):
        module = path / "__init__.py" if path.is_dir() else path
        if path.name.startswith("_") or module.suffix != ".py" or not module.exists():
            continue
        doc = ast.get_docstring(ast.parse(module.read_text())) or ""
        found[path.stem if path.is_file() else path.name] = doc.splitlines()[0] if doc else ""
    return found


def smoke_runs(names: list[str] | None = None) -> list[tuple[str, ...]]:
    """The smoke runs of `names` (default: all), one process each: the benchmarks grouped in
    SMOKE_TOGETHER share one, every other runs alone."""
    wanted = names or list(SMOKE)
    grouped = [tuple(n for n in group if n in wanted) for group in SMOKE_TOGETHER]
    together = {n for group in grouped for n in group}
    return [g for g in grouped if g] + [(n,) for n in wanted if n not in together]


def smoke_command(names: tuple[str, ...]) -> list[str]:
    """The command line of one smoke run: a benchmark's own, or `together` for a group."""
    if len(names) == 1:
        return [sys.executable, "-m", "benchmarks", names[0], *SMOKE[names[0]]]
    return [sys.executable, "-m", "benchmarks", "together", *names]


def together(names: list[str]) -> None:
    """Run the smoke runs of `names` one after another in this process; the first that
    fails ends it (its `benchmark failed:` line last, as when it runs alone)."""
    for name in names:
        print(f"== {name} {' '.join(SMOKE[name])}", flush=True)
        sys.argv = [f"benchmarks.{name}", *SMOKE[name]]
        runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)


def smoke(names: list[str]) -> int:
    """Run each benchmark at its smoke size, one run at a time; 1 if any failed."""
    failed = []
    for run in smoke_runs(names):
        label = "+".join(run)
        started = time.monotonic()
        result = subprocess.run(smoke_command(run), cwd=HERE.parent, capture_output=True, text=True)
        seconds = time.monotonic() - started
        print(f"{label:<20} {'ok' if result.returncode == 0 else 'FAILED'} ({seconds:.0f} s)")
        if result.returncode != 0:
            failed.append(label)
            print(result.stdout[-3000:] + result.stderr[-3000:], file=sys.stderr)
    if failed:
        print(f"bench-smoke failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    benchmarks = _benchmarks()
    if argv and argv[0] in {"smoke", "together"}:
        unknown = [name for name in argv[1:] if name not in SMOKE]
        if unknown:
            print(f"no smoke run for {unknown}; known: {', '.join(SMOKE)}", file=sys.stderr)
            return 2
        if argv[0] == "together":
            together(argv[1:])
            return 0
        return smoke(argv[1:])
    if not argv or argv[0] in {"-h", "--help", "list"}:
        print("Benchmarks (run one with: python -m benchmarks NAME [--help | options]):")
        for name, summary in benchmarks.items():
            print(f"  {name:<20} {summary}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in benchmarks:
        print(f"no benchmark named {name!r}; known: {', '.join(benchmarks)}", file=sys.stderr)
        return 2
    sys.argv = [f"benchmarks.{name}", *rest]
    runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
