"""What each service reads from the environment: `tombstone <service> env` and the docs table.

The list of a service is not written down by hand: it is every `TOMBSTONE_*` setting that the
service's `Config.from_env` reads, recorded while it runs on an empty environment (all
defaults) and on the current one, plus the settings of the service's own CLI commands
(`tombstone mark`, `tombstone deleter status`). A setting added to a service shows up here,
in `--help` of the service and in the docs check without another list to keep.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import click

from services.core._client_config import client_settings
from services.core._env import PREFIX, Setting, all_settings, unknown_variable_warnings
from services.core.durations import format_duration
from services.core.errors import ConfigError


@dataclass(frozen=True)
class ServiceSpec:
    """Where a service's settings are read."""

    name: str
    config_module: str
    config_class: str
    cli_target: str | None
    """`TOMBSTONE_<cli_target>_*`: how the service's own CLI commands reach it (if any do)."""


SERVICES = {
    spec.name: spec
    for spec in (
        ServiceSpec("marker", "services.marker.config", "MarkerConfig", "MARKER"),
        ServiceSpec("verifier", "services.verifier.config", "VerifierConfig", None),
        ServiceSpec("deleter", "services.deleter.config", "DeleterConfig", "DELETER"),
    )
}


class _Recorder(Mapping[str, str]):
    """An environment that remembers every `TOMBSTONE_*` name looked up in it."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        if key.startswith(PREFIX):
            self.read.add(key)
        return self._environ[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str) and key.startswith(PREFIX):
            self.read.add(key)
        return key in self._environ

    def __iter__(self) -> Iterator[str]:
        return iter(self._environ)

    def __len__(self) -> int:
        return len(self._environ)


def _module(spec: ServiceSpec) -> Any:
    return importlib.import_module(spec.config_module)


def service_defaults(spec: ServiceSpec) -> dict[str, str]:
    """Defaults that depend on the service (the shared settings' default is "its own")."""
    module = _module(spec)
    return {
        f"{PREFIX}GRPC_PORT": str(module.DEFAULT_PORT),
        f"{PREFIX}METRICS_PORT": str(module.DEFAULT_METRICS_PORT),
    }


def settings_of(spec: ServiceSpec, environ: Mapping[str, str] | None = None) -> list[Setting[Any]]:
    """Every setting the service reads (with the defaults, and with `environ` if given), plus
    those of its own CLI commands; sorted by name."""
    module = _module(spec)
    load = getattr(module, spec.config_class).from_env
    names: set[str] = set()
    for env in ({}, environ):
        if env is None:
            continue
        recorder = _Recorder(env)
        # What was read before a bad value still counts; the run on defaults is complete.
        with contextlib.suppress(ConfigError):
            load(recorder)
        names |= recorder.read
    if spec.cli_target is not None:
        client = client_settings(spec.cli_target, f"127.0.0.1:{module.DEFAULT_PORT}")
        names |= {s.name for s in client.values()}
    known = all_settings()
    return [known[name] for name in sorted(names) if name in known]


def show(value: object) -> str:
    """A value as an operator would write it in the variable."""
    if value is None or value == "" or value == () or value == {}:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, tuple | list | frozenset):
        return ",".join(str(v) for v in value)
    if isinstance(value, str | int | float):
        return str(value)
    return "(unset)" if not value else "(set)"


def describe(setting: Setting[Any], defaults: Mapping[str, str]) -> dict[str, str]:
    """One setting: name, default, format and help (the parts that do not depend on the
    current environment)."""
    return {
        "name": setting.name,
        "default": defaults.get(setting.name, show(setting.default)),
        "format": setting.format,
        "help": setting.help,
    }


def current(setting: Setting[Any], environ: Mapping[str, str]) -> str:
    """The current value as the service would read it, `(default)` when unset."""
    raw = environ.get(setting.name)
    if raw is None or not raw.strip():
        return "(default)"
    if setting.secret:
        return "(set, hidden)"
    try:
        setting.read(environ)
    except ConfigError as exc:
        return f"{raw}  <- INVALID: {exc.problem}"
    return raw.strip()


def env_command(service: str) -> click.Command:
    """`tombstone <service> env`: every setting the service reads, with default, format and
    current value; unknown `TOMBSTONE_*` variables are warned about on stderr."""
    spec = SERVICES[service]

    @click.command("env")
    @click.option("--names", "names_only", is_flag=True, help="Print only the variable names.")
    def env(names_only: bool) -> None:
        environ = dict(os.environ)
        for line in unknown_variable_warnings(environ):
            click.echo(line, err=True)
        defaults = service_defaults(spec)
        for setting in settings_of(spec, environ):
            if names_only:
                click.echo(setting.name)
                continue
            row = describe(setting, defaults)
            click.echo(f"{row['name']}={current(setting, environ)}")
            click.echo(f"    default: {row['default']}; format: {row['format']}")
            click.echo(f"    {row['help']}")

    env.help = (
        f"Every TOMBSTONE_* variable the {service} reads: current value, default, format "
        "(units) and meaning."
    )
    return env


def settings_markdown() -> str:
    """The settings table of docs/operations.md (a test checks the file holds exactly this)."""
    rows: dict[str, tuple[dict[str, str], list[str]]] = {}
    for spec in SERVICES.values():
        defaults = service_defaults(spec)
        for setting in settings_of(spec):
            row, readers = rows.setdefault(setting.name, (describe(setting, defaults), []))
            readers.append(spec.name)
            if row["default"] != describe(setting, defaults)["default"]:
                row["default"] = "the service's own"
    lines = [
        "| Variable | Read by | Default | Format | Meaning |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, (row, readers) in sorted(rows.items()):
        cells = [f"`{name}`", ", ".join(readers), row["default"], row["format"], row["help"]]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def warn_unknown_variables(environ: Mapping[str, str] = os.environ) -> None:
    """Print one warning line per unknown `TOMBSTONE_*` variable to stderr (at start)."""
    for line in unknown_variable_warnings(environ):
        sys.stderr.write(line + "\n")


__all__ = [
    "SERVICES",
    "ServiceSpec",
    "env_command",
    "settings_markdown",
    "settings_of",
    "warn_unknown_variables",
]


if __name__ == "__main__":
    # `python -m services.core.env_cli`: the table of docs/operations.md, regenerated.
    sys.stdout.write(settings_markdown())
