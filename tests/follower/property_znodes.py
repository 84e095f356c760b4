"""Cursor znodes whose properties reference ledgers, as Pulsar writes them.

- `compaction_cursor`: the `__compaction` cursor of a compacted topic. `TwoPhaseCompactor`
  (`AbstractTwoPhaseCompactor.phaseTwo`) marks each new compacted ledger with
  `cursor.markDelete(position, {"CompactedTopicLedger": id})`;
  `ManagedCursorImpl.persistPositionMetaStore` writes that map into
  `ManagedCursorInfo.properties` when the cursor closes (`cursorsLedgerId = -1`), and
  releases before `switchToNewLedger` persisted the mark-delete properties wrote an active
  cursor's switch with the new `cursorsLedgerId` alone (`properties=None` here).
  `CompactedTopicImpl.newCompactedLedger` deletes the previous ledger after the mark.
- `bucket_cursor`: a subscription cursor of a topic with bucket-based delayed delivery
  (PIP-195). `BucketDelayedDeliveryTracker` seals a bucket into a ledger written by
  `BookkeeperBucketSnapshotStorage` and records it as the cursor property
  `#pulsar.internal.delayed.bucket_<start>_<end>` = the ledger id in decimal
  (`ManagedCursorImpl.putCursorProperty`); a merge removes the merged buckets' properties
  (`removeCursorProperty`, `ManagedCursorInfo.cursorProperties`) and then deletes their
  ledgers.
"""

from __future__ import annotations

from services.metadata import ManagedCursorInfo, encode_cursor_info
from tests.marker.builders import ML_PATH

COMPACTION = "__compaction"
COMPACTION_PATH = f"{ML_PATH}/{COMPACTION}"


def bucket_key(start: int, end: int) -> str:
    return f"#pulsar.internal.delayed.bucket_{start}_{end}"


def compaction_cursor(compacted: int | None, *, cursor_ledger: int = -1) -> bytes:
    """The `__compaction` cursor naming `compacted` (None: a write without properties)."""
    info = ManagedCursorInfo(
        cursorsLedgerId=cursor_ledger, markDeleteLedgerId=5, markDeleteEntryId=7
    )
    if compacted is not None:
        info.properties.add(name="CompactedTopicLedger", value=compacted)
    return encode_cursor_info(info)


def bucket_cursor(*buckets: tuple[int, int, int], cursor_ledger: int = -1) -> bytes:
    """A subscription cursor with bucket snapshots, each (start, end, ledger id), and a
    property of its own that names no ledger."""
    info = ManagedCursorInfo(
        cursorsLedgerId=cursor_ledger, markDeleteLedgerId=5, markDeleteEntryId=7
    )
    info.cursorProperties.add(name="app", value="12")
    for start, end, ledger_id in buckets:
        info.cursorProperties.add(name=bucket_key(start, end), value=str(ledger_id))
    return encode_cursor_info(info)


def compacted_ledger_metadata(topic: str) -> dict[str, bytes]:
    """The custom metadata of a compacted ledger (`CompactedTopicImpl.newCompactedLedger`,
    `LedgerMetadataUtils.buildMetadataForCompactedLedger`, Pulsar 2.3+)."""
    return {
        "application": b"pulsar",
        "component": b"compacted-ledger",
        "pulsar/compactedTopic": topic.encode(),
        "pulsar/compactedTo": b"\x08\x05\x10\x09",  # MessageIdData{ledgerId: 5, entryId: 9}
    }


def bucket_ledger_metadata(topic: str, subscription: str, start: int, end: int) -> dict[str, bytes]:
    """The custom metadata of a bucket snapshot ledger
    (`BookkeeperBucketSnapshotStorage.createBucketSnapshot`,
    `LedgerMetadataUtils.buildMetadataForDelayedIndexBucket`, Pulsar 3.0+): the subscription
    decoded, as the broker knows it."""
    return {
        "application": b"pulsar",
        "component": b"delayed-index-bucket",
        "pulsar/delayedIndexBucketKey": bucket_key(start, end).encode(),
        "pulsar/delayedIndexTopic": topic.encode(),
        "pulsar/delayedIndexCursor": subscription.encode(),
    }
