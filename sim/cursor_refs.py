"""Ledgers referenced from cursor properties, outside any ML list.

- A compacted-topic ledger (`TwoPhaseCompactor`, all versions): its id is the LongProperty
  `CompactedTopicLedger` of the `__compaction` cursor's mark-delete properties; while that
  cursor is closed they sit in its znode (`ManagedCursorInfo.properties`, field 5), as here.
  Its custom metadata: `application=pulsar`, `component=compacted-ledger`,
  `pulsar/compactedTopic`, `pulsar/compactedTo` (none before Pulsar 2.3).
- A delayed-delivery bucket snapshot ledger (PIP-195, 3.0+,
  `BookkeeperBucketSnapshotStorage`): a cursor string property
  `#pulsar.internal.delayed.bucket_<start>_<end>` = the ledger id in decimal
  (`ManagedCursorInfo.cursorProperties`, field 8), with `component=delayed-index-bucket`.

The services do not follow these references (a PDLI names an ML, cursor or schema owner,
never a cursor property), so only S1 counts them: a forged, replayed or misdirected PDLI
naming such a ledger must never delete it. Their leaks are the reconciler's (L1 does not ask
for them).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from services.metadata.pulsar_formats import ManagedCursorInfo, decode_cursor_info
from services.metadata.pulsar_names import cursor_path

if TYPE_CHECKING:
    from sim.state import TopicState
    from sim.view import WorldView

COMPACTION_CURSOR = "__compaction"
COMPACTED_LEDGER = "CompactedTopicLedger"
BUCKET_PREFIX = "#pulsar.internal.delayed.bucket"
SHARE = 0.3
"""Of the topics, the share with a compacted ledger; independently, with a bucket snapshot."""


def property_refs(info: ManagedCursorInfo) -> set[int]:
    """The ledger ids a cursor znode names in its properties."""
    ids = {p.value for p in info.properties if p.name == COMPACTED_LEDGER}
    ids.update(int(p.value) for p in info.cursorProperties if p.name.startswith(BUCKET_PREFIX))
    return ids


def add_cursor_refs(world: WorldView, topics: list[TopicState], seed: int) -> None:
    """Compacted ledgers and bucket snapshots for a drawn share of `topics` (a generator of
    their own, so the other draws of the seed stay as they were), each id put in
    `world.property_ledgers`."""
    rng = random.Random(seed * 31 + 7)
    for t in topics:
        tenant, namespace, _, local = t.ml.split("/")
        topic = f"persistent://{tenant}/{namespace}/{local}"
        if rng.random() < SHARE:
            _compacted(world, t, topic, legacy=rng.random() < 0.1)
        if rng.random() < SHARE:
            _bucket(world, t, topic, rng)


def _compacted(world: WorldView, t: TopicState, topic: str, *, legacy: bool) -> None:
    custom = (
        {}
        if legacy
        else {
            "application": b"pulsar",
            "component": b"compacted-ledger",
            "pulsar/compactedTopic": topic.encode(),
            "pulsar/compactedTo": b"\x08\x01\x10\x09",  # MessageIdData{ledgerId: 1, entryId: 9}
        }
    )
    ledger = world.cluster.new_ledger(custom, closed=True)
    world.property_ledgers.add(ledger)  # before the write that references it
    path = cursor_path(t.ml, COMPACTION_CURSOR)
    info = ManagedCursorInfo(cursorsLedgerId=-1)
    info.properties.add(name=COMPACTED_LEDGER, value=ledger)
    world.owners[path] = frozenset()
    world.zk.create(path, world.cluster.cursor_bytes(info))


def _bucket(world: WorldView, t: TopicState, topic: str, rng: random.Random) -> None:
    start = rng.randint(1, 5)
    key = f"{BUCKET_PREFIX}_{start}_{start + 1}"
    ledger = world.cluster.new_ledger(
        {
            "application": b"pulsar",
            "component": b"delayed-index-bucket",
            "pulsar/delayedIndexBucketKey": key.encode(),
            "pulsar/delayedIndexTopic": topic.encode(),
            "pulsar/delayedIndexCursor": t.cursor.encode(),
        },
        closed=True,
    )
    world.property_ledgers.add(ledger)  # before the write that references it
    path = cursor_path(t.ml, t.cursor)
    node = world.zk.nodes[path]
    info = decode_cursor_info(node.data, path=path)
    info.cursorProperties.add(name=key, value=str(ledger))
    world.zk.set(path, world.cluster.cursor_bytes(info), version=node.version)
