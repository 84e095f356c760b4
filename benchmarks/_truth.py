"""What every benchmark shares so that its figures cannot describe work that did not happen.

A figure measured while the work failed (dead letters, errors, a verdict mix other than the
one planned, fewer items than asked) is the rate of something else: such a run ends with
`UndoneWork`, which `main` turns into a non-zero exit and a line saying why.

`--smoke` runs a benchmark at a tiny size (seconds) with every check still on: the figures
mean nothing, but a benchmark that no longer runs, or whose work no longer happens, fails
`make bench-smoke` instead of waiting for the next measured run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


class UndoneWork(RuntimeError):
    """The run's work did not happen as planned: its figure would measure something else."""


def require(condition: object, why: str) -> None:
    """Fail the run with `why` unless `condition` holds."""
    if not condition:
        raise UndoneWork(why)


def require_count(what: str, done: int | float, expected: int | float) -> None:
    """Fail unless exactly `expected` of `what` were done."""
    if done != expected:
        raise UndoneWork(f"{what}: {done:,.0f} done, {expected:,.0f} planned")


def parse(
    parser: argparse.ArgumentParser, smoke: dict[str, Any], argv: list[str] | None = None
) -> argparse.Namespace:
    """Parse with a `--smoke` flag added: it sets the options in `smoke` to their tiny values,
    except those given explicitly on the command line."""
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="a tiny size (seconds) with every check on, for `make bench-smoke`: "
        f"{', '.join(f'{k}={v}' for k, v in smoke.items()) or 'the defaults'}",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        for name, value in smoke.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    return args


def run(entry: Callable[[], object]) -> None:
    """Run a benchmark's entry point; undone work exits non-zero with the reason."""
    try:
        result = entry()
    except UndoneWork as e:
        raise SystemExit(f"benchmark failed: {e}") from None
    if isinstance(result, int) and result:
        raise SystemExit(result)
