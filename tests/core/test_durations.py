"""The one duration syntax (`services.core.durations`) of settings and CLI options."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.core.config import ZK_SESSION
from services.core.durations import format_duration, parse_duration
from services.core.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30", timedelta(seconds=30)),
        ("0.5", timedelta(milliseconds=500)),
        ("500ms", timedelta(milliseconds=500)),
        ("90s", timedelta(seconds=90)),
        ("1h30m", timedelta(minutes=90)),
        ("1h 30m", timedelta(minutes=90)),
        ("3d", timedelta(days=3)),
        ("2w", timedelta(weeks=2)),
        ("1.5h", timedelta(minutes=90)),
    ],
)
def test_durations_parse_and_print_back(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert parse_duration(format_duration(expected)) == expected


@pytest.mark.parametrize("text", ["", "abc", "30x", "-1", "-5m", "1m1h", "1h1h", "ms", "3 days"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(text)


def test_env_reads_what_the_cli_reads() -> None:
    """`3d` is a valid reconciler --min-age; the same text is valid in a TOMBSTONE_* value."""
    assert ZK_SESSION.read({ZK_SESSION.name: "3d"}) == timedelta(days=3)
    with pytest.raises(ConfigError, match=ZK_SESSION.name):
        ZK_SESSION.read({ZK_SESSION.name: "3 days"})


def test_format_duration_is_shortest() -> None:
    assert format_duration(timedelta(minutes=10)) == "10m"
    assert format_duration(timedelta(hours=24)) == "1d"
    assert format_duration(timedelta(0)) == "0s"
