"""Click parameter types sharing the services' value syntax."""

from __future__ import annotations

from datetime import timedelta

import click

from services.core.durations import format_duration, parse_duration


class Duration(click.ParamType[timedelta]):
    """A CLI duration in the syntax of the `TOMBSTONE_*` durations (`services.core.durations`):
    `500ms`, `90s`, `1h30m`, `3d`, or plain seconds; optionally bounded (inclusive)."""

    name = "duration"

    def __init__(self, minimum: timedelta | None = None, maximum: timedelta | None = None):
        self.minimum = minimum
        self.maximum = maximum

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> timedelta:
        if isinstance(value, timedelta):
            parsed = value
        else:
            try:
                parsed = parse_duration(str(value))
            except ValueError as exc:
                self.fail(f"{value!r}: {exc}", param, ctx)
        if self.minimum is not None and parsed < self.minimum:
            self.fail(f"{value!r} is below {format_duration(self.minimum)}", param, ctx)
        if self.maximum is not None and parsed > self.maximum:
            self.fail(f"{value!r} is above {format_duration(self.maximum)}", param, ctx)
        return parsed
