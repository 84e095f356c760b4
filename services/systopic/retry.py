"""Retries of PDLIs through the retry topic (docs/design.md §5).

The Python client has no `reconsumeLater`: a retry is a copy of the PDLI published to the
retry topic, carrying the attempt number in a property and its earliest next attempt in the
PDLI's own `not_before_ms` (the marker's choice instead of the client's delivery delay, which
would turn batching off). The original is acknowledged only after the copy is stored.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from services.core.errors import CorruptData
from services.systopic.messages import encode_intent
from services.systopic.ports import OutgoingMessage
from tombstone.v1 import pending_delete_pb2 as _pd

PROP_RETRY_COUNT = "retryCount"
PROP_RETRY_REASON = "retryReason"
PROP_ORIGIN_MESSAGE_ID = "originMessageId"
_MAX_REASON = 500


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, capped, and a maximum number of retries."""

    initial_delay: timedelta = timedelta(seconds=1)
    """Delay before the first retry."""
    max_delay: timedelta = timedelta(minutes=5)
    """No retry waits longer than this."""
    multiplier: float = 2.0
    """Growth of the delay from one retry to the next."""
    jitter: float = 0.2
    """Each delay is scaled by a random factor in [1 - jitter, 1 + jitter]."""
    max_retries: int = 10
    """After this many retries the PDLI goes to the dead-letter topic."""

    def __post_init__(self) -> None:
        if self.max_retries < 0 or not 0 <= self.jitter < 1 or self.multiplier < 1:
            raise ValueError(f"invalid retry policy {self}")

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """The wait before retry number `attempt` (1-based), jittered and capped."""
        base = self.initial_delay.total_seconds() * self.multiplier ** max(0, attempt - 1)
        capped = min(base, self.max_delay.total_seconds())
        factor = (rng or random).uniform(1 - self.jitter, 1 + self.jitter)
        return timedelta(seconds=min(capped * factor, self.max_delay.total_seconds()))

    def exhausted(self, attempt: int) -> bool:
        """Whether retry number `attempt` would exceed the budget."""
        return attempt > self.max_retries


def retry_count(properties: Mapping[str, str]) -> int:
    """The retries a message has had; `CorruptData` if the property is not a count."""
    raw = properties.get(PROP_RETRY_COUNT)
    if raw is None:
        return 0
    try:
        count = int(raw)
    except ValueError:
        count = -1
    if count < 0:
        raise CorruptData(f"property {PROP_RETRY_COUNT}={raw!r} is not a retry count")
    return count


def retry_message(
    pdli: _pd.PendingDeleteLedgerInfo,
    *,
    attempt: int,
    reason: str,
    not_before_ms: int,
    origin_message_id: str,
) -> OutgoingMessage:
    """The copy of `pdli` for retry number `attempt`, due no earlier than `not_before_ms`."""
    copy = _pd.PendingDeleteLedgerInfo()
    copy.CopyFrom(pdli)
    copy.not_before_ms = max(pdli.not_before_ms, not_before_ms)
    message = encode_intent(copy)
    properties = dict(message.properties)
    properties[PROP_RETRY_COUNT] = str(attempt)
    properties[PROP_RETRY_REASON] = reason[:_MAX_REASON]
    properties[PROP_ORIGIN_MESSAGE_ID] = origin_message_id
    return OutgoingMessage(message.payload, message.partition_key, properties)
