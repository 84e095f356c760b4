"""What the world and its workloads share: a topic's state and the copies an owner references."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

CHAOS_SECONDS = 30.0
"""The span of the workload and the faults; then the run heals and quiesces."""
LEDGER, OFFLOAD = "ledger", "offload"
Copy = tuple[int, str, str]
"""(ledger id, tier, uuid or ""): one copy of a ledger that an owner references."""


@dataclass
class TopicState:
    ml: str
    cursor: str
    broker: int
    unmodified: bool = False
    """Its broker never calls the marker: it writes the metadata itself, then deletes."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
