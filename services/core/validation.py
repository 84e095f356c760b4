"""Request checks for servicers. Each failure raises `InvalidArgument` naming the field."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sized

from services.core.errors import InvalidArgument


def require(condition: bool, field: str, problem: str) -> None:
    """Raise `InvalidArgument(field, problem)` unless `condition` holds."""
    if not condition:
        raise InvalidArgument(field, problem)


def require_nonempty(value: Sized, field: str) -> None:
    """The string or collection must not be empty."""
    require(len(value) > 0, field, "must not be empty")


def require_non_negative(value: int, field: str) -> None:
    """Ledger ids, versions and counts are never negative."""
    require(value >= 0, field, f"must be non-negative, got {value}")


def require_positive(value: int | float, field: str) -> None:
    """Sizes and limits must be above zero."""
    require(value > 0, field, f"must be positive, got {value}")


def require_max_length(value: Sized, limit: int, field: str) -> None:
    """Bound the size of a string or a repeated field."""
    require(len(value) <= limit, field, f"has {len(value)} items, at most {limit} allowed")


def require_no_duplicates(values: Iterable[Hashable], field: str) -> None:
    """Each value may appear once; the message names the first repeated one."""
    seen: set[Hashable] = set()
    for value in values:
        require(value not in seen, field, f"duplicate value {value!r}")
        seen.add(value)


def require_one_of(value: str, choices: Iterable[str], field: str) -> None:
    """The value must be one of `choices`."""
    allowed = sorted(choices)
    require(value in allowed, field, f"must be one of {', '.join(allowed)}, got {value!r}")
