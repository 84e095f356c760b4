"""The one answer to "is this a cancellation?". Cancellation is never swallowed."""

from __future__ import annotations

import asyncio


def is_cancelled(exc: BaseException) -> bool:
    """True for `CancelledError`, or a group made only of cancellations.

    Code that catches broad exceptions for logging must re-raise when this is true.
    """
    if isinstance(exc, asyncio.CancelledError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_cancelled(inner) for inner in exc.exceptions)
    return False
