"""`python -m benchmarks` lists the benchmarks; `python -m benchmarks NAME [ARGS]` runs one.

Each benchmark is its own module with its own options (`python -m benchmarks NAME --help`),
and prints its figures beside the raw client's, measured in the same run.
"""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def main(argv: list[str]) -> int:
    benchmarks = _benchmarks()
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
