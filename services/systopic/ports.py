"""The producer port of the system topic: what the marker (and later the deleter) depend on.

Nothing here imports `pulsar`; the adapter in `_pulsar.py` is the only module that does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple, Protocol


class OutgoingMessage(NamedTuple):
    """One message for the system topic (or its retry and dead-letter topics).

    A named tuple rather than a dataclass: thousands are built per second on the hot path.
    """

    payload: bytes
    """The serialized `PendingDeleteLedgerInfo`."""
    partition_key: str
    """Routes the message; every tier of one ledger uses the same key (the ledger id)."""
    properties: Mapping[str, str] = {}
    """String properties readable without decoding the payload (never mutated)."""


class SendResult(NamedTuple):
    """The outcome of one message: accepted with a message id, or failed with a reason."""

    message_id: str | None = None
    """`(ledger,entry,partition,batch_index)` of the stored message when accepted."""
    error: str | None = None
    """Why the topic did not accept the message (timeout, broker error...)."""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ProducerSettings:
    """How a system-topic producer batches, bounds and names itself."""

    producer_name: str
    """Stable per marker instance: the broker deduplicates resent messages by it (PIP-6)."""
    max_in_flight: int = 10_000
    """Messages sent but not yet acknowledged, across all callers."""
    max_round: int = 1000
    """Largest round, i.e. batch, per partition: the messages queued for a partition while
    its previous round is in flight are sent as one batch, up to this many."""
    send_timeout: timedelta = timedelta(seconds=30)
    """A message not acknowledged within this fails (the client retries until then)."""


class IntentPublisher(Protocol):
    """Publishes messages durably and reports one receipt per message.

    `publish` pipelines the messages (within the publisher's bounded in-flight window) and
    returns only when every message has an outcome: accepted (the topic stored it) or failed.
    An exception from `publish` means no message of the call may be counted as accepted.
    """

    @property
    def producer_name(self) -> str:
        """The stable producer name; the broker deduplicates by it (PIP-6)."""
        ...

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        """Send all `messages`; results are in the same order."""
        ...

    async def close(self) -> None:
        """Flush and close; idempotent."""
        ...
