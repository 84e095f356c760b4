"""Names of protobuf enum numbers that may come from anyone (a forged or newer PDLI)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def enum_name(name_of: Callable[[Any], str], number: int) -> str:
    """`name_of(number)` (an enum's `Name`), or `UNKNOWN(<number>)` for a number outside the
    enum: protobuf keeps unknown numbers of open enums, and `Name` raises on them."""
    try:
        return name_of(number)
    except ValueError:
        return f"UNKNOWN({number})"
