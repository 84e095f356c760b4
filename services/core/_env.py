"""Typed environment settings and the registry of every variable the services read.

Each setting is declared once, at import time, with its name, parser, default and help. The
registry lets tests and the Compose file check that every variable they set is one some
service reads (`describe_env()`), and a bad value always raises `ConfigError` naming the
variable.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from services.core import durations
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
    format: str = "text"
    """What a value looks like (unit and syntax), for `env` listings and the docs."""

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
    name: str,
    parse: Callable[[str], T],
    default: T,
    help: str,
    *,
    secret: bool = False,
    format: str | None = None,
) -> Setting[T]:
    """Declare `TOMBSTONE_<name>`. Declaring the same name twice must agree on its help.

    `format` defaults to the one the parser was registered with (every parser below is)."""
    full = name if name.startswith(PREFIX) else PREFIX + name
    shape = format or _FORMATS.get(parse, "text")
    declared = Setting(full, parse, default, help, secret, shape)
    existing = _REGISTRY.get(full)
    if existing is not None and existing.help != help:
        raise ValueError(f"{full} is declared twice with different meanings")
    _REGISTRY[full] = declared  # type: ignore[assignment]
    return declared


def all_settings() -> dict[str, Setting[object]]:
    """Every declared setting of every part of the project, by name (sorted)."""
    for module in _SETTING_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not (exc.name and module.startswith(exc.name)):
                raise
    return {name: _REGISTRY[name] for name in sorted(_REGISTRY)}


def describe_env() -> dict[str, str]:
    """Every variable any service reads, mapped to its help text (sorted by name)."""
    return {name: s.help for name, s in all_settings().items()}


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """`TOMBSTONE_*` variables in `environ` that no service reads (likely typos)."""
    known = describe_env()
    return sorted(name for name in environ if name.startswith(PREFIX) and name not in known)


def unknown_variable_warnings(environ: Mapping[str, str]) -> list[str]:
    """One line per unknown `TOMBSTONE_*` variable, naming the closest known one if any."""
    known = list(describe_env())
    lines = []
    for name in unknown_variables(environ):
        line = f"warning: unknown variable {name} is ignored"
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            line += f" (did you mean {close[0]}?)"
        lines.append(line)
    return lines


# --- parsers -------------------------------------------------------------------------------

# The format of each parser, so that `setting()` knows it without being told.
_FORMATS: dict[Callable[[str], object], str] = {durations.parse_duration: durations.DURATION_FORMAT}
parse_duration = durations.parse_duration


def _described(format: str, parse: Callable[[str], T]) -> Callable[[str], T]:
    _FORMATS[parse] = format
    return parse


def parse_int(minimum: int | None = None, maximum: int | None = None) -> Callable[[str], int]:
    """An integer parser with inclusive bounds."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("expected an integer") from None
        if minimum is not None and value < minimum:
            raise ValueError(f"must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be at most {maximum}")
        return value

    low = "" if minimum is None else str(minimum)
    high = "" if maximum is None else str(maximum)
    return _described(f"integer {low}..{high}" if low or high else "integer", parse)


parse_port = _described("port 0..65535", parse_int(0, 65535))

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse_bool(raw: str) -> bool:
    """`true/false`, `yes/no`, `on/off`, `1/0` (any case)."""
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected true or false")


_BOOL = "true/false (yes/no, on/off, 1/0)"
parse_bool = _described(_BOOL, _parse_bool)


def _parse_optional_bool(raw: str) -> bool | None:
    """Like `parse_bool`; the default (None) means "decide from other settings"."""
    return parse_bool(raw)


parse_optional_bool = _described(_BOOL, _parse_optional_bool)


def _parse_str(raw: str) -> str:
    return raw


def _parse_optional_str(raw: str) -> str | None:
    return raw


parse_str = _described("text", _parse_str)
parse_optional_str = _described("text", _parse_optional_str)


def _parse_list(raw: str) -> tuple[str, ...]:
    """Comma-separated values, blanks dropped."""
    return tuple(item.strip() for item in raw.split(",") if item.strip())


parse_list = _described("comma-separated list", _parse_list)


def parse_choice(*choices: str) -> Callable[[str], str]:
    """One of `choices`, case-insensitive; the value comes back spelt as declared."""
    spelt = {choice.lower(): choice for choice in choices}

    def parse(raw: str) -> str:
        choice = spelt.get(raw.lower())
        if choice is None:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return choice

    return _described("one of " + "|".join(choices), parse)
