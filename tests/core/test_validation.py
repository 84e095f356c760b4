"""Request checks raise InvalidArgument naming the field, and pass good input."""

from __future__ import annotations

import asyncio

import pytest

from services.core.errors import InvalidArgument
from services.core.tasks import is_cancelled
from services.core.validation import (
    require,
    require_max_length,
    require_no_duplicates,
    require_non_negative,
    require_nonempty,
    require_one_of,
    require_positive,
)


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (lambda: require(False, "f", "is bad"), "f: is bad"),
        (lambda: require_nonempty("", "f"), "f: must not be empty"),
        (lambda: require_non_negative(-1, "f"), "f: must be non-negative, got -1"),
        (lambda: require_positive(0, "f"), "f: must be positive, got 0"),
        (lambda: require_max_length([1, 2, 3], 2, "f"), "f: has 3 items, at most 2 allowed"),
        (lambda: require_no_duplicates([1, 2, 1], "f"), "f: duplicate value 1"),
        (lambda: require_one_of("x", ["b", "a"], "f"), "f: must be one of a, b, got 'x'"),
    ],
)
def test_failures_name_the_field(check, message: str) -> None:
    """Each helper raises InvalidArgument whose message starts with the field."""
    with pytest.raises(InvalidArgument) as caught:
        check()
    assert ("f", message) == (caught.value.field, str(caught.value))


def test_good_input_passes() -> None:
    """Valid values raise nothing."""
    require(True, "f", "unused")
    require_nonempty([1], "f")
    require_non_negative(0, "f")
    require_positive(1, "f")
    require_max_length("ab", 2, "f")
    require_no_duplicates([1, 2], "f")
    require_one_of("a", ["a"], "f")


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (asyncio.CancelledError(), True),
        (BaseExceptionGroup("g", [asyncio.CancelledError()]), True),
        (BaseExceptionGroup("g", [asyncio.CancelledError(), ValueError()]), False),
        (TimeoutError(), False),
    ],
)
def test_is_cancelled(exc: BaseException, expected: bool) -> None:
    """Only cancellations (alone or grouped) count as cancelled."""
    assert expected == is_cancelled(exc)
