"""Ledgers a cursor znode references through its properties rather than its
`cursorsLedgerId` (docs/follower.md, "Cursor properties"), as the follower indexes them.

- The `__compaction` cursor's LongProperty `CompactedTopicLedger` names the topic's compacted
  ledger (`AbstractTwoPhaseCompactor.phaseTwo` → `cursor.markDelete(position, properties)`).
  Only that cursor's property is a compacted-ledger reference.
- Any cursor's string property `#pulsar.internal.delayed.bucket_<start>_<end>` names a
  delayed-delivery bucket snapshot ledger in decimal (`BucketDelayedDeliveryTracker` →
  `Bucket.putBucketKeyId` → `ManagedCursorImpl.putCursorProperty`).

Only these two keys are followed: the follower says what a write stopped naming, so reading
another key as a reference could only send PDLIs that the verifier's wider in-use check
(`services.metadata.cursor_properties`, any property naming the id) then refuses. A value
that is no ledger id is left out, so nothing is ever sent for it.
"""

from __future__ import annotations

from services.metadata.cursor_properties import (
    BUCKET_KEY_PREFIX,
    COMPACTED_TOPIC_LEDGER,
    parse_ledger_id,
)
from services.metadata.pulsar_formats import ManagedCursorInfo

COMPACTION_CURSOR = "__compaction"
NO_LEDGER = -1


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
        if prop.name.startswith(BUCKET_KEY_PREFIX):
            ledger_id = parse_ledger_id(prop.value)
            if ledger_id is not None:
                ids.add(ledger_id)
    return sorted(ids)
