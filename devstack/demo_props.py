"""The demo's ledgers owned through cursor properties: compacted-topic ledgers and
delayed-delivery bucket snapshots, on a topic of their own (`props-demo`) in the seeded
cluster's first namespace, written as released Pulsar writes them.

`plant` (with the seed, before the services start):

- the topic's ML znode listing its current ledger (OPEN);
- a compaction crash leftover: a ledger `TwoPhaseCompactor.phaseTwo` created and closed
  before its broker crashed, so no `markDelete` ever named it (apache/pulsar #12522): the
  reconciler's to find (`compacted_unreferenced`), its dry run and submit to remove;
- a compacted ledger, the `CompactedTopicLedger` mark-delete property of the closed
  `__compaction` cursor (`ManagedCursorInfo.properties`);
- three bucket snapshots (`BookkeeperBucketSnapshotStorage.createBucketSnapshot`), each the
  ledger of a `#pulsar.internal.delayed.bucket_<start>_<end>` cursor property of the
  subscription (`ManagedCursorInfo.cursorProperties`, `putBucketKeyId`).

`move` (once the marker's follower runs), as an unmodified broker does, never calling the
marker:

- a compaction: a new compacted ledger, then the `__compaction` cursor's property moved to
  it (`markDelete`), then `CompactedTopicImpl.newCompactedLedger`'s delete of the previous
  one fails: a leak only the follower's OBSERVED intent removes;
- a bucket merge (`BucketDelayedDeliveryTracker.asyncMergeBucketSnapshot`): the merged
  snapshot sealed (ledger, then property), then each old bucket's property removed and its
  ledger deleted (`Bucket.asyncDeleteBucketSnapshot`), the second delete failing (#22802).

What must hold: the two leaks deleted by the services; the live compacted ledger and the
live bucket snapshots (the merged one and the one left alone) kept; the leftover kept until
the reconciler proposes and submits it, then deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from devstack.demo_outcome import BOOKKEEPER, Unlinked
from devstack.demo_stores import DemoMetadata, cluster_store
from devstack.ledger_writer import LedgerWriter
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import ReadBack
from devstack.simulator.spec import FIRST_LONG_LEDGER_ID
from services.metadata import (
    ANY_VERSION,
    LedgerState,
    ManagedLedgers,
    MetadataStore,
)
from services.metadata.pulsar_formats import ManagedCursorInfo, ManagedLedgerInfo

LOCAL_NAME = "props-demo"
SUBSCRIPTION = "delayed-sub"
COMPACTION_CURSOR = "__compaction"
COMPACTED_TOPIC_LEDGER = "CompactedTopicLedger"
BUCKET_PREFIX = "#pulsar.internal.delayed.bucket"
_ENTRIES = 20
_ENTRY_BYTES = 256


def _bucket_key(start: int, end: int) -> str:
    return f"{BUCKET_PREFIX}_{start}_{end}"


@dataclass
class PlantedProps:
    """What `plant` and `move` wrote, and what each ledger must become."""

    ml_name: str
    topic: str
    current: int
    leftover: int
    """Compaction crash leftover: never referenced (the reconciler's)."""
    compacted_old: int
    """Compacted ledger the compaction in `move` replaces; its delete fails (the follower's)."""
    buckets: tuple[int, int, int]
    """Bucket snapshots: two merged away in `move` (the second one's delete fails), one kept."""
    compacted_new: int | None = None
    merged_bucket: int | None = None
    moved: bool = False

    @property
    def leaks(self) -> list[Unlinked]:
        """The references `move` dropped whose broker delete failed: the follower's."""
        if not self.moved:
            return []
        return [
            Unlinked(self.compacted_old, BOOKKEEPER, "compacted ledger, its delete failed"),
            Unlinked(self.buckets[1], BOOKKEEPER, "bucket snapshot merged away, delete failed"),
        ]

    @property
    def live(self) -> list[Unlinked]:
        """Still referenced through a cursor property: must be kept (S1)."""
        kept = [
            (self.compacted_new, "compacted ledger of the __compaction cursor"),
            (self.merged_bucket, "bucket snapshot referenced by its cursor"),
            (self.buckets[2], "bucket snapshot referenced by its cursor"),
        ]
        if not self.moved:
            kept = [
                (self.compacted_old, "compacted ledger of the __compaction cursor"),
                *((b, "bucket snapshot referenced by its cursor") for b in self.buckets),
            ]
        return [
            Unlinked(i, BOOKKEEPER, f"still referenced: {name}", still_referenced=True)
            for i, name in kept
            if i is not None
        ]

    def describe(self) -> str:
        return (
            f"Cursor-property ledgers on {self.topic}: compacted ledger {self.compacted_old} "
            f"(property of {COMPACTION_CURSOR}), compaction crash leftover {self.leftover}, "
            f"bucket snapshots {', '.join(map(str, self.buckets))} (properties of "
            f"{SUBSCRIPTION})"
        )

    def moved_line(self) -> str:
        return (
            f"compaction moved {COMPACTION_CURSOR} to {self.compacted_new}, the delete of "
            f"{self.compacted_old} failed; buckets {self.buckets[0]} and {self.buckets[1]} "
            f"merged into {self.merged_bucket}, the delete of {self.buckets[1]} failed"
        )

    def before_reconciler_problems(self, now: ReadBack) -> list[str]:
        """The leftover is the reconciler's: the services must not have deleted it."""
        if self.leftover in now.ledgers:
            return []
        return [f"S1: compaction leftover {self.leftover} deleted before the reconciler ran"]

    def after_reconciler_problems(self, now: ReadBack, proposed: set[int]) -> list[str]:
        found = []
        if self.leftover not in proposed:
            found.append(f"compaction leftover {self.leftover} not proposed by the reconciler")
        elif self.leftover in now.ledgers:
            found.append(f"compaction leftover {self.leftover} still there after the submit")
        found += [
            f"S1: {item.artifact} {item.ledger_id} was deleted"
            for item in self.live
            if item.ledger_id not in now.ledgers
        ]
        wrongly = sorted(proposed & {i.ledger_id for i in self.live})
        found += [f"the reconciler proposed {i}, still referenced" for i in wrongly]
        return found


def _ledgers(store: MetadataStore, model: ClusterModel) -> LedgerWriter:
    """Ledger ids from the cluster's generator, znodes at the hybrid path (Pulsar >= 2.10)."""
    return LedgerWriter(
        store,
        model.spec.ledgers_root,
        model.bookies,
        model.spec.ensemble_size,
        long_ids=any(i >= FIRST_LONG_LEDGER_ID for i in model.ledgers),
        entries=_ENTRIES,
        entry_bytes=_ENTRY_BYTES,
    )


def _compacted_meta(topic: str) -> dict[str, bytes]:
    """`LedgerMetadataUtils.buildMetadataForCompactedLedger`."""
    return {
        "application": b"pulsar",
        "component": b"compacted-ledger",
        "pulsar/compactedTopic": topic.encode(),
        "pulsar/compactedTo": b"\x08\x01\x10\x13",  # MessageIdData{ledgerId: 1, entryId: 19}
    }


def _bucket_meta(key: str, topic: str) -> dict[str, bytes]:
    """`BookkeeperBucketSnapshotStorage`'s ledger metadata."""
    return {
        "application": b"pulsar",
        "component": b"delayed-index-bucket",
        "pulsar/delayedIndexBucketKey": key.encode(),
        "pulsar/delayedIndexTopic": topic.encode(),
        "pulsar/delayedIndexCursor": SUBSCRIPTION.encode(),
    }


def _data_meta(ml_name: str) -> dict[str, bytes]:
    return {
        "application": b"pulsar",
        "component": b"managed-ledger",
        "pulsar/managed-ledger": ml_name.encode(),
    }


def _closed_cursor() -> ManagedCursorInfo:
    """`persistPositionMetaStore` of a closed cursor: `cursorsLedgerId = -1`."""
    return ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=19)


async def plant(model: ClusterModel, metadata: str | DemoMetadata) -> PlantedProps:
    """Write the topic, its cursors and their ledgers (see the module docstring) into
    `metadata` (a ZooKeeper's `host:port`, or a `devstack.demo_stores` store)."""
    first = next(ml for ml in model.managed_ledgers.values() if not ml.shadow_source)
    tenant, namespace = first.name.split("/")[:2]
    ml_name = f"{tenant}/{namespace}/persistent/{LOCAL_NAME}"
    topic = f"persistent://{tenant}/{namespace}/{LOCAL_NAME}"
    async with cluster_store(metadata, model.spec.ledgers_root) as store:
        ledgers = _ledgers(store, model)
        mls = ManagedLedgers(store)
        leftover = await ledgers.write(LedgerState.CLOSED, _compacted_meta(topic))
        compacted = await ledgers.write(LedgerState.CLOSED, _compacted_meta(topic))
        keys = [_bucket_key(s, s + 1) for s in (1, 3, 5)]
        buckets = [
            await ledgers.write(LedgerState.CLOSED, _bucket_meta(key, topic)) for key in keys
        ]
        current = await ledgers.write(LedgerState.OPEN, _data_meta(ml_name))
        info = ManagedLedgerInfo()
        info.ledgerInfo.add(ledgerId=current, timestamp=0)
        await mls.create(ml_name, info)
        compaction = _closed_cursor()
        compaction.properties.add(name=COMPACTED_TOPIC_LEDGER, value=compacted)
        await mls.create_cursor(ml_name, COMPACTION_CURSOR, compaction)
        subscription = _closed_cursor()
        for key, ledger in zip(keys, buckets, strict=True):
            subscription.cursorProperties.add(name=key, value=str(ledger))
        await mls.create_cursor(ml_name, SUBSCRIPTION, subscription)
    return PlantedProps(
        ml_name, topic, current, leftover, compacted, (buckets[0], buckets[1], buckets[2])
    )


async def move(planted: PlantedProps, model: ClusterModel, metadata: str | DemoMetadata) -> None:
    """A compaction and a bucket merge, each with its broker's delete failing (see the
    module docstring)."""
    async with cluster_store(metadata, model.spec.ledgers_root) as store:
        ledgers = _ledgers(store, model)
        mls = ManagedLedgers(store)
        # TwoPhaseCompactor.phaseTwo, then markDelete on the closed cursor: into its znode.
        planted.compacted_new = await ledgers.write(
            LedgerState.CLOSED, _compacted_meta(planted.topic)
        )
        record = await mls.read_cursor(planted.ml_name, COMPACTION_CURSOR)
        compaction = record.value
        del compaction.properties[:]
        compaction.properties.add(name=COMPACTED_TOPIC_LEDGER, value=planted.compacted_new)
        await mls.write_cursor(
            planted.ml_name, COMPACTION_CURSOR, compaction, version=record.version
        )
        # CompactedTopicImpl.newCompactedLedger's delete of the previous ledger fails.
        # The merge: sealed first (ledger, then putBucketKeyId) ...
        merged_key = _bucket_key(1, 4)
        planted.merged_bucket = await ledgers.write(
            LedgerState.CLOSED, _bucket_meta(merged_key, planted.topic)
        )
        record = await mls.read_cursor(planted.ml_name, SUBSCRIPTION)
        subscription = record.value
        subscription.cursorProperties.add(name=merged_key, value=str(planted.merged_bucket))
        version = await mls.write_cursor(
            planted.ml_name, SUBSCRIPTION, subscription, version=record.version
        )
        # ... then each old bucket: removeBucketCursorProperty, then deleteBucketSnapshot.
        for old in planted.buckets[:2]:
            kept = [p for p in subscription.cursorProperties if p.value != str(old)]
            del subscription.cursorProperties[:]
            subscription.cursorProperties.extend(kept)
            version = await mls.write_cursor(
                planted.ml_name, SUBSCRIPTION, subscription, version=version
            )
            if old == planted.buckets[0]:
                # This delete succeeds; the second one fails.
                await store.delete(ledgers.ledger_path(old), version=ANY_VERSION)
    planted.moved = True
