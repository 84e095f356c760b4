"""The seeded scheduler: the one source of randomness of a run, and its event trace.

Every draw of a run comes from one `random.Random(seed)` in a fixed order (the virtual loop
runs callbacks in a deterministic order), so a seed replays the same events, faults and
outcomes byte for byte. Ports call `io()` at each await point of I/O: it draws a delay and,
while faults are on, a fault.
"""

from __future__ import annotations

import asyncio
import enum
import random
from dataclasses import dataclass


class Fault(enum.Enum):
    NONE = "none"
    BEFORE = "lost-before"
    """The request never reached the server: nothing applied, the caller sees an error."""
    AFTER = "lost-after"
    """The server applied the request but the answer was lost: the caller sees an error."""
    ERROR = "error"
    """The server answered with an error (5xx, refused): nothing applied."""


@dataclass(frozen=True)
class FaultRates:
    """Per port call, while faults are on."""

    lost_before: float = 0.015
    lost_after: float = 0.015
    error: float = 0.015
    max_delay: float = 0.05
    """Seconds; each call waits a drawn delay up to this (reorders concurrent calls)."""


class Scheduler:
    def __init__(self, seed: int, rates: FaultRates | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.rates = rates or FaultRates()
        self.faults_on = True
        self.trace: list[str] = []

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def now_ms(self) -> int:
        return int(self.now() * 1000)

    def log(self, event: str) -> None:
        self.trace.append(f"{self.now():10.3f} {event}")

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def draw(self) -> Fault:
        if not self.faults_on:
            return Fault.NONE
        r, rates = self.rng.random(), self.rates
        if r < rates.lost_before:
            return Fault.BEFORE
        if r < rates.lost_before + rates.lost_after:
            return Fault.AFTER
        if r < rates.lost_before + rates.lost_after + rates.error:
            return Fault.ERROR
        return Fault.NONE

    async def delay(self) -> None:
        """A drawn delay (zero half the time: still one yield to the loop)."""
        if self.rng.random() < 0.5:
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(self.rng.random() * self.rates.max_delay)

    async def io(self, what: str) -> Fault:
        """One port call: wait a drawn delay, then draw its fault (logged when not NONE)."""
        await self.delay()
        fault = self.draw()
        if fault is not Fault.NONE:
            self.log(f"fault {fault.value} {what}")
        return fault
