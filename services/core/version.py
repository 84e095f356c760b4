"""The installed version, for `--version` and `tombstone_build_info`."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any, TypeVar

import click

DISTRIBUTION = "pulsar-tombstone"
F = TypeVar("F", bound=Callable[..., Any])


def version() -> str:
    """The installed distribution's version; `unknown` when run from a bare source tree."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def version_option(prog: str) -> Callable[[F], F]:
    """`--version`: print `<prog> <version>` (from the package metadata) and exit."""

    def show(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value and not ctx.resilient_parsing:
            click.echo(f"{prog} {version()}")
            ctx.exit()

    return click.option(
        "--version",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=show,
        help="Print the version (from the package metadata) and exit.",
    )
