"""Faults a test can switch on in a running broker (through the admin API or directly)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tombstone.wire import pulsar_api_pb2 as _pb

ERRORS: dict[str, int] = dict(_pb.ServerError.items())


def error_number(name: str) -> int:
    """A ServerError by name, e.g. "PersistenceError"; ValueError if unknown."""
    try:
        return ERRORS[name]
    except KeyError:
        raise ValueError(f"unknown ServerError {name!r}") from None


@dataclass
class _Budget:
    """A fault that applies to the next `count` requests, or until a deadline, or both."""

    count: int = 0
    until: float = 0.0
    error: int = _pb.PersistenceError

    def arm(self, count: int | None, seconds: float | None, error: int) -> None:
        self.count = count or 0
        self.until = time.monotonic() + seconds if seconds else 0.0
        self.error = error

    def take(self) -> int | None:
        if self.count > 0:
            self.count -= 1
            return self.error
        if self.until and time.monotonic() < self.until:
            return self.error
        return None


class Faults:
    """Switchable failures: send errors, send delays, refused producers, paused dispatch."""

    def __init__(self) -> None:
        self.failing_sends = _Budget()
        self.refused_producers = _Budget()
        self.send_delay = 0.0
        self.send_delay_until = 0.0
        self.dispatch_paused = False

    def fail_sends(
        self,
        *,
        count: int | None = None,
        seconds: float | None = None,
        error: str = "PersistenceError",
    ) -> None:
        """Answer the next `count` SENDs (or every SEND for `seconds`) with SEND_ERROR."""
        if not count and not seconds:
            raise ValueError("fail_sends needs a count or a duration")
        self.failing_sends.arm(count, seconds, error_number(error))

    def refuse_producers(
        self,
        *,
        count: int | None = None,
        seconds: float | None = None,
        error: str = "ServiceNotReady",
    ) -> None:
        """Answer the next `count` PRODUCER requests (or all for `seconds`) with ERROR."""
        if not count and not seconds:
            raise ValueError("refuse_producers needs a count or a duration")
        self.refused_producers.arm(count, seconds, error_number(error))

    def delay_sends(self, seconds: float, *, duration: float | None = None) -> None:
        """Hold every SEND `seconds` before storing it (for `duration`, else until cleared)."""
        if seconds < 0:
            raise ValueError("a send delay cannot be negative")
        self.send_delay = seconds
        self.send_delay_until = time.monotonic() + duration if duration else 0.0

    def current_send_delay(self) -> float:
        if self.send_delay_until and time.monotonic() >= self.send_delay_until:
            self.send_delay = 0.0
            self.send_delay_until = 0.0
        return self.send_delay

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]
