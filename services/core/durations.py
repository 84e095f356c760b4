"""The one duration syntax of the suite, for `TOMBSTONE_*` values and CLI options alike.

A duration is plain seconds (`30`, `0.5`) or one or more `<number><unit>` parts, largest unit
first: `500ms`, `90s`, `15m`, `1h30m`, `3d`, `2w`. Units: ms, s, m, h, d, w. Negative values
are refused (none of the settings means anything by them).
"""

from __future__ import annotations

import re
from datetime import timedelta

UNIT_SECONDS = {"w": 604_800.0, "d": 86_400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
DURATION_FORMAT = "duration (e.g. 500ms, 90s, 1h30m, 3d; plain = seconds)"

_NUMBER = r"\d+(?:\.\d+)?"
_PART = re.compile(rf"({_NUMBER})\s*(ms|s|m|h|d|w)\s*")
_PLAIN = re.compile(rf"^{_NUMBER}$")
_ORDER = list(UNIT_SECONDS)


def parse_duration(raw: str) -> timedelta:
    """`raw` as a timedelta; ValueError naming the accepted forms otherwise."""
    text = raw.strip()
    if _PLAIN.match(text):
        return timedelta(seconds=float(text))
    seconds, position, last_unit = 0.0, 0, -1
    for match in _PART.finditer(text):
        unit = _ORDER.index(match.group(2))
        if match.start() != position or unit <= last_unit:
            break
        seconds += float(match.group(1)) * UNIT_SECONDS[match.group(2)]
        position, last_unit = match.end(), unit
    if not text or position != len(text):
        raise ValueError("expected a duration such as 90s, 500ms, 1h30m, 3d or 30 (seconds)")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest text `parse_duration` reads back as `value` (e.g. `1h30m`, `500ms`, `0s`)."""
    millis = round(value.total_seconds() * 1000)
    if millis == 0:
        return "0s"
    sign, millis = ("-", -millis) if millis < 0 else ("", millis)
    parts = []
    for unit in _ORDER:
        size = round(UNIT_SECONDS[unit] * 1000)
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return sign + "".join(parts)
