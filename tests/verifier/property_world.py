"""Compacted-topic ledgers, bucket snapshots and the cursor znodes that name them, written into
the real ZooKeeper as Pulsar writes them (each fixture names the Pulsar code it models)."""

from __future__ import annotations

from services.metadata.pulsar_formats import ManagedCursorInfo, encode_cursor_info
from services.metadata.pulsar_names import cursor_path
from tests.verifier.world import ML, TOPIC, World

COMPACTION = "__compaction"
SUBSCRIPTION = "delayed sub"
"""A subscription whose cursor znode name is encoded (`Codec.encode`): `delayed+sub`."""
SUB_CURSOR = "delayed+sub"
BUCKET_KEY = "#pulsar.internal.delayed.bucket_3_9"
OLD = 1_000


def compacted_meta(topic: str = TOPIC) -> dict[str, bytes]:
    """`CompactedTopicImpl.newCompactedLedger`
    (`LedgerMetadataUtils.buildMetadataForCompactedLedger`)."""
    return {
        "application": b"pulsar",
        "component": b"compacted-ledger",
        "pulsar/compactedTopic": topic.encode(),
        "pulsar/compactedTo": b"\x08\x05\x10\x09",  # MessageIdData{ledgerId: 5, entryId: 9}
    }


def bucket_meta(topic: str = TOPIC, subscription: str = SUBSCRIPTION) -> dict[str, bytes]:
    """`BookkeeperBucketSnapshotStorage.createBucketSnapshot` (`LedgerMetadataUtils.
    buildMetadataForDelayedIndexBucket`)."""
    return {
        "application": b"pulsar",
        "component": b"delayed-index-bucket",
        "pulsar/delayedIndexBucketKey": BUCKET_KEY.encode(),
        "pulsar/delayedIndexTopic": topic.encode(),
        "pulsar/delayedIndexCursor": subscription.encode(),
    }


async def cursor_znode(
    world: World,
    cursor: str,
    *,
    ledger: int = -1,
    compacted: int | None = None,
    buckets: dict[str, str] | None = None,
    version: int = 0,
    ml: str = ML,
) -> int:
    """A cursor znode as `ManagedCursorImpl` persists it: `cursorsLedgerId` (-1 once closed),
    the mark-delete `properties` and the `cursorProperties` (PIP-105)."""
    info = ManagedCursorInfo(cursorsLedgerId=ledger, markDeleteLedgerId=1, markDeleteEntryId=0)
    if compacted is not None:
        info.properties.add(name="CompactedTopicLedger", value=compacted)
    for key, value in (buckets or {}).items():
        info.cursorProperties.add(name=key, value=value)
    return await world._put(cursor_path(ml, cursor), encode_cursor_info(info), version)
