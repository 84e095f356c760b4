"""Producers and consumers as the broker sees them: one per (connection, id)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections import deque

    from .entries import Entry
    from .subscription import Subscription
    from .topic import Topic


class Peer(Protocol):
    """What the broker needs from a client connection."""

    def send_message(
        self,
        consumer_id: int,
        entry: Entry,
        partition: int,
        redelivery_count: int,
        ack_set: list[int] | None,
    ) -> None: ...

    def close_consumer(self, consumer_id: int) -> None:
        """Tell the client to drop and re-create this consumer (broker-initiated close)."""

    def close_producer(self, producer_id: int) -> None:
        """Tell the client to drop and re-create this producer (broker-initiated close)."""


@dataclass(eq=False)
class Consumer:
    peer: Peer
    consumer_id: int
    name: str
    subscription: Subscription
    priority: int = 0
    hash_ranges: list[tuple[int, int]] | None = None
    """Key_Shared STICKY ranges (inclusive); None lets the broker split the hash space."""
    permits: int = 0
    seq: int = 0
    """Order of arrival on the subscription (Failover and AUTO_SPLIT order by it)."""


@dataclass(eq=False)
class Producer:
    peer: Peer
    producer_id: int
    name: str
    topic: Topic
    access_mode: int
    """ProducerAccessMode: Shared, Exclusive, WaitForExclusive or ExclusiveWithFencing."""
    delayed: deque[object] | None = field(default=None)
    """SENDs held back by a delay fault, processed in order (receipts stay ordered)."""

    @property
    def shared(self) -> bool:
        return self.access_mode == 0
