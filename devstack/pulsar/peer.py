"""A client connection as producers and consumers see it (`Peer`): the one thing the topic
model asks of a connection."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .entries import Entry


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
