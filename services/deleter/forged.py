"""The pace of forged dead letters: a token bucket per PDLI source.

Whoever can produce to the system topic can send forged PDLIs; each must reach the dead-letter
topic (an operator must see it, and a misconfigured marker key makes real intents look forged,
so none may be dropped). To keep that topic from growing without bound, a forged PDLI waits for
a token of its source's bucket before it is dead-lettered: the excess is held in the window
(backpressure on the receive loop), never discarded, and the dead-letter topic grows by at
most `burst + rate * t` letters per source over any time `t`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ForgedPace:
    rate: float = 1.0
    """Forged dead letters per second, per source."""
    burst: int = 100
    """Forged dead letters a source may send at once after a quiet time."""

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.burst < 1:
            raise ValueError(f"invalid forged pace {self}")


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class ForgedLimiter:
    pace: ForgedPace = field(default_factory=ForgedPace)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    async def admit(self, source: str) -> float:
        """Wait for a token of `source`'s bucket; return how long it waited (seconds).

        Each caller reserves its token at once (the balance may go below zero), so waiters are
        served in arrival order and the rate holds whatever their number. A caller cancelled
        while waiting forfeits its token: the pace can only get slower, never faster."""
        now = self.clock()
        bucket = self._buckets.get(source)
        if bucket is None:
            bucket = self._buckets[source] = _Bucket(float(self.pace.burst), now)
        bucket.tokens = min(
            float(self.pace.burst), bucket.tokens + (now - bucket.at) * self.pace.rate
        )
        bucket.at = now
        bucket.tokens -= 1
        if bucket.tokens >= 0:
            return 0.0
        wait = -bucket.tokens / self.pace.rate
        await self.sleep(wait)
        return wait


__all__ = ["ForgedLimiter", "ForgedPace"]
