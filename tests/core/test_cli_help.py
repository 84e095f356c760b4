"""Every option of every `tombstone` command says what it is for (units and formats with it):
`--help` is the first documentation an operator reads."""

from __future__ import annotations

import click
import pytest

from services.cli import SUBCOMMANDS, _load


def _options_without_help(command: click.Command, prefix: str) -> list[str]:
    if isinstance(command, click.Group):
        return [
            missing
            for name, sub in sorted(command.commands.items())
            for missing in _options_without_help(sub, f"{prefix} {name}")
        ]
    return [
        f"{prefix} {param.opts[0]}"
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_option_has_help(name: str) -> None:
    command = _load(name)
    assert command is not None
    assert _options_without_help(command, name) == []
