"""Ledgers a cursor znode references through its properties rather than its
`cursorsLedgerId` (docs/follower.md, "Cursor properties").

- The `__compaction` cursor's LongProperty `CompactedTopicLedger` names the topic's compacted
  ledger (`AbstractTwoPhaseCompactor.phaseTwo` → `cursor.markDelete(position, properties)`).
  Only that cursor's property is a compacted-ledger reference.
- Any cursor's string property `#pulsar.internal.delayed.bucket_<start>_<end>` names a
  delayed-delivery bucket snapshot ledger in decimal (`BucketDelayedDeliveryTracker` →
  `Bucket.putBucketKeyId` → `ManagedCursorImpl.putCursorProperty`).

A value that does not parse as a ledger id is no reference the follower can follow: it is
left out, so nothing is ever sent for it (the verifier's in-use rule still counts it).
"""

from __future__ import annotations

from services.metadata.pulsar_formats import ManagedCursorInfo

COMPACTION_CURSOR = "__compaction"
COMPACTED_TOPIC_LEDGER = "CompactedTopicLedger"
DELAYED_BUCKET_PREFIX = "#pulsar.internal.delayed.bucket"
NO_LEDGER = -1
MAX_LEDGER_ID = 2**63 - 1
"""A BookKeeper ledger id is a signed 64-bit integer (and the index stores int64)."""


def compacted_ledger(cursor_name: str, info: ManagedCursorInfo) -> int:
    """The compacted ledger the znode names, or -1 (another cursor, or no property)."""
    if cursor_name != COMPACTION_CURSOR:
        return NO_LEDGER
    found = NO_LEDGER
    for prop in info.properties:
        if prop.name == COMPACTED_TOPIC_LEDGER and prop.value >= 0:
            found = prop.value  # Pulsar writes a map: one value per name
    return found


def bucket_ledgers(info: ManagedCursorInfo) -> list[int]:
    """The bucket snapshot ledgers the znode names, sorted, each once."""
    ids: set[int] = set()
    for prop in info.cursorProperties:
        if not prop.name.startswith(DELAYED_BUCKET_PREFIX):
            continue
        value = prop.value  # `String.valueOf(ledgerId)`: plain ASCII digits
        if value.isascii() and value.isdecimal() and int(value) <= MAX_LEDGER_ID:
            ids.add(int(value))
    return sorted(ids)
