"""Waits and small utilities shared by the tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def assert_eventually(
    check: Callable[[], Awaitable[T]], *, timeout: float = 10.0, interval: float = 0.05
) -> T:
    """Await `check` until it stops raising AssertionError; re-raise the last one on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(interval)
