"""Ledgers a cursor znode references through its properties (docs/verifier.md, "Ledgers owned
through cursor properties").

Two kinds of ledgers are referenced by a property of a cursor znode, not by a list:
- a compacted-topic ledger: the LongProperty `CompactedTopicLedger` of the `__compaction`
  cursor's mark-delete properties (`AbstractTwoPhaseCompactor.phaseTwo` → `markDelete(pos,
  props)`). In the znode (`ManagedCursorInfo.properties`) only while that cursor is closed
  (`cursorsLedgerId == -1`); while it is active the live value is in its cursor ledger's last
  entry, which the verifier cannot read;
- a delayed-delivery bucket snapshot: a cursor string property
  `#pulsar.internal.delayed.bucket_<start>_<end>` = the ledger id in decimal
  (`ManagedCursorInfo.cursorProperties`, always persisted in the znode;
  `BucketDelayedDeliveryTracker`).

The verifier's in-use check and the marker's reference check are deliberately wider than
those two keys: any LongProperty equal to a ledger id, and any string property whose value
parses as one, counts as a reference. A false "in use" costs a skipped deletion; a missed key
would cost a live ledger.
"""

from __future__ import annotations

from tombstone.formats import managed_ledger_pb2 as _ml

COMPACTED_TOPIC_LEDGER = "CompactedTopicLedger"
"""The mark-delete property naming the compacted ledger (`Compactor.COMPACTED_TOPIC_LEDGER_
PROPERTY`)."""
BUCKET_KEY_PREFIX = "#pulsar.internal.delayed.bucket"
"""Prefix of a bucket snapshot's cursor property key (`DelayedDeliveryTracker`'s
`DELAYED_BUCKET_KEY_PREFIX`)."""
_MAX_DIGITS = 19


def property_ledger_ids(info: _ml.ManagedCursorInfo) -> frozenset[int]:
    """Every ledger id a property of the cursor names (conservatively: any value that is one)."""
    ids = {p.value for p in info.properties if p.value >= 0}
    for prop in info.cursorProperties:
        parsed = parse_ledger_id(prop.value)
        if parsed is not None:
            ids.add(parsed)
    return frozenset(ids)


def bucket_entries(info: _ml.ManagedCursorInfo, ledger_id: int) -> list[str]:
    """Keys of the bucket-snapshot properties that name `ledger_id`."""
    return [
        p.name
        for p in info.cursorProperties
        if p.name.startswith(BUCKET_KEY_PREFIX) and parse_ledger_id(p.value) == ledger_id
    ]


def persisted_compacted_ledger(info: _ml.ManagedCursorInfo) -> int | None:
    """The `CompactedTopicLedger` value the znode holds, or None when it holds none."""
    values = [p.value for p in info.properties if p.name == COMPACTED_TOPIC_LEDGER]
    return values[-1] if values else None


def parse_ledger_id(text: str) -> int | None:
    """A decimal ledger id as `Long.parseLong` reads it (surrounding spaces tolerated, so that
    nothing Java might read as an id is missed); None when it is not one."""
    text = text.strip()
    digits = text[1:] if text[:1] == "+" else text
    if not digits.isascii() or not digits.isdigit() or len(digits) > _MAX_DIGITS:
        return None
    value = int(digits)
    return value if value < 2**63 else None
