"""The `tombstone` command.

Subcommands live next to the code they drive and are imported only when used, so that
`tombstone marker serve --help` does not load Spark and a missing optional part does not
break the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from services.core.version import version_option

# name -> "module:attribute" of a click command or group.
SUBCOMMANDS: dict[str, str] = {
    "demo": "devstack.demo:demo",
    "devstack": "devstack.cli:devstack",
    "marker": "services.marker.cli:marker",
    "mark": "services.marker.cli:mark",
    "verifier": "services.verifier.cli:verifier",
    "deleter": "services.deleter.cli:deleter",
    "health": "services.healthcheck:health",
    "keys": "services.core.keys_cli:keys",
    "reconcile": "services.scan.cli.reconcile:reconcile",
    "setup": "services.systopic.setup_cli:setup",
    "zookeeper": "services.metadata.secure_cli:zookeeper",
}


def _load(name: str) -> click.Command | None:
    module_name, _, attr = SUBCOMMANDS[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Only a missing part of this project is tolerated, never a missing dependency.
        if exc.name and module_name.startswith(exc.name):
            return None
        raise
    command = getattr(module, attr)
    assert isinstance(command, click.Command)
    return command


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in SUBCOMMANDS if _load(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in SUBCOMMANDS:
            return None
        return _load(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@version_option("tombstone")
def cli() -> None:
    """Tombstone: safe two-phase deletion of Pulsar ledgers and their offloaded copies."""


def main(*args: Any) -> None:
    cli(*args)


if __name__ == "__main__":
    main()
