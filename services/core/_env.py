"""Typed environment settings and the registry of every variable the services read.

Each setting is declared once, at import time, with its name, parser, default and help. The
registry lets tests and the Compose file check that every variable they set is one some
service reads (`describe_env()`), and a bad value always raises `ConfigError` naming the
variable.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Generic, TypeVar

from services.core.errors import ConfigError

PREFIX = "TOMBSTONE_"
"""Every variable the services read starts with this prefix."""

T = TypeVar("T")

_REGISTRY: dict[str, Setting[object]] = {}

# Modules that declare settings; imported by `describe_env()` so the listing is complete even
# when the caller has not imported every service. Missing parts of the project are skipped.
_SETTING_MODULES = (
    "services.core.config",
    "services.marker.config",
    "services.verifier.config",
    "services.deleter.config",
)


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One environment variable: its full name, how to parse it and what it means."""

    name: str
    parse: Callable[[str], T]
    default: T
    help: str
    secret: bool = False

    def read(self, environ: Mapping[str, str]) -> T:
        """The parsed value, or the default when the variable is unset or blank."""
        raw = environ.get(self.name)
        if raw is None or not raw.strip():
            return self.default
        try:
            return self.parse(raw.strip())
        except (ValueError, OSError) as exc:
            shown = "<hidden>" if self.secret else repr(raw)
            raise ConfigError(self.name, f"invalid value {shown}: {exc}") from exc


def setting(
    name: str, parse: Callable[[str], T], default: T, help: str, *, secret: bool = False
) -> Setting[T]:
    """Declare `TOMBSTONE_<name>`. Declaring the same name twice must agree on its help."""
    full = name if name.startswith(PREFIX) else PREFIX + name
    declared = Setting(full, parse, default, help, secret)
    existing = _REGISTRY.get(full)
    if existing is not None and existing.help != help:
        raise ValueError(f"{full} is declared twice with different meanings")
    _REGISTRY[full] = declared  # type: ignore[assignment]
    return declared


def describe_env() -> dict[str, str]:
    """Every variable any service reads, mapped to its help text (sorted by name)."""
    for module in _SETTING_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not (exc.name and module.startswith(exc.name)):
                raise
    return {name: _REGISTRY[name].help for name in sorted(_REGISTRY)}


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """`TOMBSTONE_*` variables in `environ` that no service reads (likely typos)."""
    known = describe_env()
    return sorted(name for name in environ if name.startswith(PREFIX) and name not in known)


# --- parsers -------------------------------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h)?$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def parse_duration(raw: str) -> timedelta:
    """`"30"` or `"30s"` (seconds), `"500ms"`, `"5m"`, `"1h"`."""
    match = _DURATION.match(raw)
    if match is None:
        raise ValueError("expected a duration such as 30, 30s, 500ms, 5m or 1h")
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2)])


def parse_int(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """An integer parser with inclusive bounds."""

    def parse(raw: str) -> int:
        value = int(raw)
        if minimum is not None and value < minimum:
            raise ValueError(f"must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be at most {maximum}")
        return value

    return parse


parse_port = parse_int(0, 65535)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_bool(raw: str) -> bool:
    """`true/false`, `yes/no`, `on/off`, `1/0` (any case)."""
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected true or false")


def parse_optional_bool(raw: str) -> bool | None:
    """Like `parse_bool`; the default (None) means "decide from other settings"."""
    return parse_bool(raw)


def parse_str(raw: str) -> str:
    return raw


def parse_optional_str(raw: str) -> str | None:
    return raw


def parse_list(raw: str) -> tuple[str, ...]:
    """Comma-separated values, blanks dropped."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def parse_choice(*choices: str) -> Callable[[str], str]:
    """One of `choices`, case-insensitive."""

    def parse(raw: str) -> str:
        lowered = raw.lower()
        if lowered not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return lowered

    return parse
