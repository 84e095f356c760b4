"""The consumer port of the system topic (and of its retry and dead-letter topics).

Nothing here imports `pulsar`; `_consumer.py` is the adapter. A received message ends in
exactly one of three ways, chosen by its caller: `acknowledge` (done), `release` (give it back
for redelivery, which counts towards the client's dead-letter backstop), or nothing at all
when the process stops (closing the consumer gives it back without counting).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One received message, with what the deleter needs to decide and to settle it."""

    payload: bytes
    """The raw bytes (a serialized PDLI, unless the message is garbage)."""
    properties: Mapping[str, str]
    """String properties (routing facts, retry count, dead-letter reason)."""
    message_id: str
    """`ledger:entry:partition:batch_index` on the topic it came from."""
    topic: str
    """The topic (partition) it came from."""
    redelivery_count: int = 0
    """How often the broker delivered it before (the client's backstop counts this)."""
    publish_time_ms: int = 0
    """When it was published, ms since the epoch."""
    handle: object = field(default=None, compare=False, repr=False)
    """The adapter's own message object, needed to acknowledge or release it."""


class MessageSource(Protocol):
    """A Shared subscription on one topic."""

    @property
    def topic(self) -> str:
        """The subscribed topic."""
        ...

    async def receive(self) -> IncomingMessage:
        """The next message (waits for one)."""
        ...

    async def acknowledge(self, message: IncomingMessage) -> None:
        """Mark `message` done; it is never delivered again to this subscription."""
        ...

    async def release(self, message: IncomingMessage) -> None:
        """Give `message` back: it is redelivered later with a higher redelivery count."""
        ...

    async def close(self) -> None:
        """Stop; messages received and not acknowledged go back to the subscription."""
        ...
