"""A subscription's delayed-delivery bucket snapshots (PIP-195, Pulsar 3.0+).

What released Pulsar does (no broker calls the marker for it):

- A bucket seal (`BucketDelayedDeliveryTracker`, `MutableBucket.sealBucketAndAsyncPersistent`,
  `Bucket.asyncSaveBucketSnapshot`): `BookkeeperBucketSnapshotStorage.createBucketSnapshot`
  creates the ledger (`component=delayed-index-bucket`), writes and closes it, then
  `putBucketKeyId` adds the cursor property `#pulsar.internal.delayed.bucket_<start>_<end>` =
  the id (`ManagedCursorImpl.putCursorProperty`: the znode written again at the version it
  read, field 8 always persisted). A broker crash in between leaves a ledger nothing ever
  referenced: the reconciler's.
- A merge (`asyncMergeBucketSnapshot`): the merged snapshot is sealed as above, then for each
  old bucket `Bucket.asyncDeleteBucketSnapshot`: the property removed
  (`removeBucketCursorProperty`), then the ledger deleted
  (`BookkeeperBucketSnapshotStorage.deleteBucketSnapshot`), which can fail and is not retried
  before 3.0.8 / 3.3.3 (apache/pulsar #22802): a leak the follower sees.
- Deleting the cursor or its topic removes every property with the znode; the tracker's
  `clear` deletes the snapshots (`PropertyRefs.dropped`), with the same failures.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.metadata.pulsar_formats import ManagedCursorInfo, decode_cursor_info
from sim.cursor_refs import BUCKET_PREFIX, CRASH_SHARE, PropertyRefs, subscription_path, topic_name
from sim.state import CHAOS_SECONDS
from tombstone.v1 import pending_delete_pb2 as _pd

if TYPE_CHECKING:
    from sim.state import TopicState


def bucket_meta(key: str, topic: str, cursor: str) -> dict[str, bytes]:
    """`BookkeeperBucketSnapshotStorage`'s ledger metadata."""
    return {
        "application": b"pulsar",
        "component": b"delayed-index-bucket",
        "pulsar/delayedIndexBucketKey": key.encode(),
        "pulsar/delayedIndexTopic": topic.encode(),
        "pulsar/delayedIndexCursor": cursor.encode(),
    }


class Buckets:
    """The bucket snapshots of one topic's subscription."""

    def __init__(self, refs: PropertyRefs, t: TopicState) -> None:
        self.refs = refs
        self.world = refs.world
        self.t = t
        self.topic = topic_name(t)
        self.path = subscription_path(t)
        self.next_start = refs.rng.randint(1, 5)
        refs.register(self.path, t)

    def _log(self, text: str) -> None:
        self.world.sched.log(f"broker-{self.t.broker} {text} ({self.t.ml}, {self.t.cursor})")

    def _key(self, start: int, end: int) -> str:
        return f"{BUCKET_PREFIX}_{start}_{end}"

    def _new_key(self) -> str:
        start = self.next_start
        self.next_start += 2
        return self._key(start, start + 1)

    def _cursor(self) -> ManagedCursorInfo | None:
        node = self.world.zk.nodes.get(self.path)
        if node is None:
            return None
        return decode_cursor_info(node.data, path=self.path)

    def _new_ledger(self, key: str) -> int:
        ledger = self.world.cluster.new_ledger(
            bucket_meta(key, self.topic, self.t.cursor), closed=True
        )
        self.world.property_ledgers.add(ledger)
        return ledger

    def _put(self, key: str, ledger: int) -> bool:
        """`putBucketKeyId`; False when the cursor is gone."""
        info = self._cursor()
        if info is None:
            return False
        info.cursorProperties.add(name=key, value=str(ledger))
        return self.refs.write(self.path, info)

    def _remove(self, key: str) -> None:
        """`removeBucketCursorProperty`."""
        info = self._cursor()
        if info is None:
            return
        kept = [p for p in info.cursorProperties if p.name != key]
        del info.cursorProperties[:]
        info.cursorProperties.extend(kept)
        self.refs.write(self.path, info)

    def plant(self) -> None:
        """A sealed bucket at the start."""
        key = self._new_key()
        self._put(key, self._new_ledger(key))

    async def run(self) -> None:
        rng = self.refs.rng
        for _ in range(rng.randint(2, 5)):
            await asyncio.sleep(rng.uniform(0.0, CHAOS_SECONDS / 4))
            if rng.random() < 0.6:
                await self.seal(self._new_key())
            else:
                await self.merge()

    async def seal(self, key: str) -> int | None:
        """A bucket sealed: its ledger, a pause (entries written), then the property; the
        ledger's id if the property was written."""
        ledger = self._new_ledger(key)
        self._log(f"bucket {key} snapshot [{ledger}] written")
        await asyncio.sleep(self.refs.rng.uniform(0.0, 1.0))
        if self.refs.rng.random() < CRASH_SHARE:
            self._log(f"crashed mid-seal: [{ledger}] never referenced")
            return None
        if not self._put(key, ledger):
            self._log(f"cursor gone mid-seal: [{ledger}] never referenced")
            return None
        return ledger

    async def merge(self) -> None:
        """Two buckets merged into one: the merged snapshot sealed, then each old bucket's
        property removed and its ledger deleted (the delete may fail)."""
        info = self._cursor()
        if info is None:
            return
        buckets = [
            (p.name, int(p.value))
            for p in info.cursorProperties
            if p.name.startswith(BUCKET_PREFIX)
        ]
        if len(buckets) < 2:
            return
        old = buckets[:2]
        starts = [int(name.split("_")[-2]) for name, _ in old]
        ends = [int(name.split("_")[-1]) for name, _ in old]
        key = self._key(min(starts), max(ends))
        if any(name == key for name, _ in buckets):
            key = self._new_key()
        if await self.seal(key) is None:
            return
        if not self.t.unmodified:
            # A PIP-186 broker: the marker removes the old properties (MARKER_WRITES) and the
            # deleters delete the snapshots; what it did not unlink stays referenced.
            await self.refs.mark(
                self.t, _pd.DELAYED_INDEX_BUCKET, self.t.cursor, tuple(i for _, i in old)
            )
            return
        for name, ledger in old:
            self._remove(name)
            self._log(f"bucket {name} merged away: deleting [{ledger}]")
            await self.world.unmodified.deletes_ledger(self.t, ledger)
