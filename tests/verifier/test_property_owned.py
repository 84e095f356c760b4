"""Compacted-topic ledgers and delayed-delivery bucket snapshots, on the real ZooKeeper.

Both are referenced by a property of a cursor znode (docs/verifier.md, "Ledgers owned through
cursor properties"). The cursor znodes and ledgers written here model Pulsar's writes:
- `AbstractTwoPhaseCompactor.phaseTwo` → `ManagedCursorImpl.markDelete(pos, properties)`
  with `CompactedTopicLedger`; `ManagedCursorImpl.close` persists those properties in the
  znode (`cursorsLedgerId = -1`); while the cursor is active they are in its cursor ledger;
- `CompactedTopicImpl.newCompactedLedger` creates the ledger with `component=compacted-ledger`
  and `pulsar/compactedTopic`;
- `BookkeeperBucketSnapshotStorage.createBucketSnapshot` creates the snapshot ledger, and
  `BucketDelayedDeliveryTracker` (`Bucket.putBucketKeyId`) names it in a cursor property.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.metrics import Metrics
from services.core.signing import IntentSigner, TrustedKeys
from services.metadata.ledger_metadata import LedgerState
from services.metadata.pulsar_names import cursor_path
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, SkipReason, Verdict
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from tests.verifier.conftest import make_parts
from tests.verifier.property_world import (
    BUCKET_KEY,
    COMPACTION,
    OLD,
    SUB_CURSOR,
    bucket_meta,
    compacted_meta,
    cursor_znode,
)
from tests.verifier.world import EAST, ML, TOPIC, World, cursor_meta, data_meta, pdli
from tombstone.v1 import pending_delete_pb2 as pb


def compacted_pdli(ledger_id: int, **changes: Any) -> pb.PendingDeleteLedgerInfo:
    fields: dict[str, Any] = {
        "component": pb.COMPACTED_LEDGER,
        "cursor": COMPACTION,
        "topic": TOPIC,
    }
    return pdli(ledger_id, **(fields | changes))


def bucket_pdli(ledger_id: int, **changes: Any) -> pb.PendingDeleteLedgerInfo:
    fields: dict[str, Any] = {
        "component": pb.DELAYED_INDEX_BUCKET,
        "cursor": SUB_CURSOR,
        "topic": TOPIC,
    }
    return pdli(ledger_id, **(fields | changes))


OPEN = LedgerState.OPEN


def outcome(verdict: Verdict) -> tuple[Decision, str]:
    return verdict.decision, verdict.code


@pytest.fixture
async def topic(world: World) -> World:
    await world.ml([20])
    await world.ledger(20, data_meta())
    return world


@pytest.fixture
def young_parts(config: VerifierConfig, store: ZkMetadataStore, s3client: Any) -> Any:
    """A verifier to which a property ledger is young for ten minutes."""
    young = replace(config, property_ledger_min_age=timedelta(minutes=10))
    return make_parts(young, store, s3client)


async def verdict_on(
    topic: World,
    parts: Any,
    message: pb.PendingDeleteLedgerInfo,
    meta: dict[str, bytes],
    cursor: str,
    *,
    state: LedgerState = LedgerState.CLOSED,
    ctime: int | None = None,
    **znode: Any,
) -> Verdict:
    """Verify `message` once its ledger carries `meta` (in `state`, created at `ctime`) and
    the znode of `cursor` is written with `znode`'s fields (`cursor_znode`)."""
    await topic.ledger(message.ledger_id, meta, state=state, ctime=ctime)
    await cursor_znode(topic, cursor, **znode)
    verdict: Verdict = await parts.engine.verify(message)
    return verdict


# --- COMPACTED_LEDGER -----------------------------------------------------------------------


async def test_compacted_ledger_named_by_a_closed_cursor_is_in_use(
    topic: World, parts: Any
) -> None:
    verdict = await verdict_on(
        topic, parts, compacted_pdli(7, fence=0), compacted_meta(), COMPACTION, compacted=7
    )
    assert verdict.skip_reason is SkipReason.IN_USE


async def test_compacted_ledger_still_named_below_the_fence_token_is_retry(
    topic: World, parts: Any
) -> None:
    """The caller's write that moves the property has not landed yet."""
    verdict = await verdict_on(
        topic, parts, compacted_pdli(7, fence=1), compacted_meta(), COMPACTION, compacted=7
    )
    assert outcome(verdict) == (Decision.RETRY, "marking_in_progress")


async def test_previous_compacted_ledger_of_a_closed_cursor_is_deleted(
    topic: World, parts: Any
) -> None:
    """`CompactedTopicImpl.newCompactedLedger` failed to delete ledger 7 after ledger 9 was
    committed: the znode names 9, so 7 is free."""
    message = compacted_pdli(7, fence=1)
    verdict = await verdict_on(
        topic, parts, message, compacted_meta(), COMPACTION, compacted=9, version=1
    )
    assert verdict.decision is Decision.DELETE


async def test_active_cursor_persisted_value_above_the_ledger_frees_it(
    topic: World, parts: Any
) -> None:
    """The reference only moves forward: a persisted 9 means the live one is 9 or newer."""
    message = compacted_pdli(7, fence=0)
    verdict = await verdict_on(
        topic, parts, message, compacted_meta(), COMPACTION, ledger=30, compacted=9
    )
    assert verdict.decision is Decision.DELETE


@pytest.mark.parametrize("persisted", [None, 7, 5])
async def test_active_cursor_otherwise_is_reference_unknown(
    topic: World, parts: Any, persisted: int | None
) -> None:
    """None persisted, the ledger itself, or an older one: the live value in the cursor
    ledger may be this ledger. RETRY, whatever the source."""
    await topic.ledger(7, compacted_meta())
    await cursor_znode(topic, COMPACTION, ledger=30, compacted=persisted)
    for source in (pb.BROKER, pb.RECONCILER, pb.OPERATOR):
        verdict = await parts.engine.verify(compacted_pdli(7, fence=0, source=source))
        expected = (Decision.RETRY, "reference_unknown")
        if persisted == 7:
            expected = (Decision.SKIP, "listed")  # the znode itself still names it
        assert outcome(verdict) == expected


async def test_compacted_ledger_of_a_deleted_topic_is_deleted(world: World, parts: Any) -> None:
    """Deleting the topic left the compacted ledger (apache/pulsar #21745): no ML, no cursor."""
    await world.ledger(7, compacted_meta(), ctime=OLD)
    verdict = await parts.engine.verify(compacted_pdli(7, source=pb.RECONCILER))
    assert verdict.decision is Decision.DELETE


async def test_compacted_ledger_naming_another_topic_is_mismatch(topic: World, parts: Any) -> None:
    meta = compacted_meta("persistent://public/default/payments")
    verdict = await verdict_on(topic, parts, compacted_pdli(7), meta, COMPACTION, compacted=9)
    assert verdict.skip_reason is SkipReason.MISMATCH
    assert [d.field for d in verdict.differences] == ["pulsar/compactedTopic"]


@pytest.mark.parametrize("source", [pb.BROKER, pb.RECONCILER])
async def test_compacted_ledger_without_custom_metadata_is_never_deleted(
    topic: World, parts: Any, source: pb.Source.ValueType
) -> None:
    """Written by Pulsar ≤ 2.2: nothing proves whose it is."""
    message = compacted_pdli(7, fence=0, source=source)
    verdict = await verdict_on(topic, parts, message, {}, COMPACTION, compacted=9)
    assert outcome(verdict) == (Decision.SKIP, "no_owner_proof")


async def test_a_data_ledger_named_as_compacted_is_mismatch(topic: World, parts: Any) -> None:
    verdict = await verdict_on(
        topic, parts, compacted_pdli(7), data_meta(), COMPACTION, compacted=9
    )
    assert verdict.skip_reason is SkipReason.MISMATCH


async def test_young_compacted_ledger_is_retry(topic: World, young_parts: Any) -> None:
    """Closed but not yet named: `phaseTwo` closes the ledger before `markDelete`."""
    message = compacted_pdli(7, fence=0)
    meta = compacted_meta()
    verdict = await verdict_on(
        topic, young_parts, message, meta, COMPACTION, ctime=OLD, compacted=5
    )
    assert outcome(verdict) == (Decision.RETRY, "property_ledger_too_young")


async def test_open_compacted_ledger_above_the_persisted_value_is_retry(
    topic: World, parts: Any
) -> None:
    """An OPEN ledger newer than the named one may be a compaction in progress."""
    message = compacted_pdli(11, fence=0, source=pb.OPERATOR)
    meta = compacted_meta()
    verdict = await verdict_on(topic, parts, message, meta, COMPACTION, state=OPEN, compacted=9)
    assert outcome(verdict) == (Decision.RETRY, "open_ledger")


async def test_open_compacted_ledger_below_the_persisted_value_is_deleted(
    topic: World, parts: Any
) -> None:
    message = compacted_pdli(7, fence=0, source=pb.OPERATOR)
    meta = compacted_meta()
    verdict = await verdict_on(topic, parts, message, meta, COMPACTION, state=OPEN, compacted=9)
    assert verdict.decision is Decision.DELETE


# --- DELAYED_INDEX_BUCKET -------------------------------------------------------------------


async def test_bucket_named_by_its_cursor_property_is_in_use(topic: World, parts: Any) -> None:
    message = bucket_pdli(8, fence=0)
    named = {BUCKET_KEY: "8"}
    verdict = await verdict_on(
        topic, parts, message, bucket_meta(), SUB_CURSOR, ledger=31, buckets=named
    )
    assert verdict.skip_reason is SkipReason.IN_USE


async def test_bucket_named_by_any_property_is_in_use(topic: World, parts: Any) -> None:
    """Conservative: any string property whose value is the id, whatever its key."""
    message = bucket_pdli(8, fence=0)
    named = {"other": " 8"}
    verdict = await verdict_on(
        topic, parts, message, bucket_meta(), SUB_CURSOR, ledger=31, buckets=named
    )
    assert verdict.skip_reason is SkipReason.IN_USE


async def test_leaked_bucket_is_deleted(topic: World, parts: Any) -> None:
    """A merge removed the property, then its `deleteBucketSnapshot` failed (#22802)."""
    await topic.ledger(8, bucket_meta())
    version = await cursor_znode(topic, SUB_CURSOR, ledger=31, buckets={"x": "12"}, version=2)
    verdict = await parts.engine.verify(bucket_pdli(8, fence=version))
    assert verdict.decision is Decision.DELETE


async def test_bucket_of_a_deleted_cursor_is_deleted(topic: World, parts: Any) -> None:
    await topic.ledger(8, bucket_meta(), ctime=OLD)
    verdict = await parts.engine.verify(bucket_pdli(8, source=pb.RECONCILER))
    assert verdict.decision is Decision.DELETE


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        (bucket_meta(subscription="other"), "pulsar/delayedIndexCursor"),
        (bucket_meta(topic="persistent://public/default/payments"), "pulsar/delayedIndexTopic"),
        (compacted_meta(), "component"),
    ],
)
async def test_bucket_metadata_must_name_its_topic_and_subscription(
    topic: World, parts: Any, meta: dict[str, bytes], field: str
) -> None:
    await topic.ledger(8, meta)
    verdict = await parts.engine.verify(bucket_pdli(8))
    assert verdict.skip_reason is SkipReason.MISMATCH
    assert field in [d.field for d in verdict.differences]


async def test_young_bucket_is_retry(topic: World, young_parts: Any) -> None:
    message = bucket_pdli(8, fence=0)
    verdict = await verdict_on(
        topic, young_parts, message, bucket_meta(), SUB_CURSOR, ctime=OLD, ledger=31
    )
    assert outcome(verdict) == (Decision.RETRY, "property_ledger_too_young")


# --- shared ---------------------------------------------------------------------------------


async def test_a_property_reference_protects_whatever_the_pdli_says(
    topic: World, parts: Any
) -> None:
    """A MANAGED_CURSOR PDLI naming the bucket snapshot its cursor still names: IN_USE."""
    message = pdli(8, component=pb.MANAGED_CURSOR, cursor=SUB_CURSOR)
    meta = cursor_meta(cursor=SUB_CURSOR)
    named = {BUCKET_KEY: "8"}
    verdict = await verdict_on(topic, parts, message, meta, SUB_CURSOR, ledger=31, buckets=named)
    assert verdict.skip_reason is SkipReason.IN_USE


async def test_an_undecodable_cursor_znode_is_retry_never_absent(topic: World, parts: Any) -> None:
    await topic.ledger(8, bucket_meta())
    await topic.store.create(cursor_path(ML, SUB_CURSOR), b"\xff\xfe not a cursor")
    verdict = await parts.engine.verify(bucket_pdli(8))
    assert verdict.decision is Decision.RETRY


@pytest.mark.parametrize(
    ("message", "field"),
    [
        (compacted_pdli(7, cursor="sub-a"), "cursor_name"),
        (compacted_pdli(7, cursor=""), "cursor_name"),
        (bucket_pdli(8, cursor=""), "cursor_name"),
        (
            compacted_pdli(7, tier=pb.OFFLOAD_LEDGER, uuid="3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a6b"),
            "ledger_type",
        ),
        (bucket_pdli(8, uuid="3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a6b"), "offload_context"),
        (compacted_pdli(7, topic=""), "topic_name"),
        (bucket_pdli(8, topic="persistent://public/default/payments"), "topic_name"),
    ],
)
async def test_invalid_property_pdlis_name_the_field(
    parts: Any, message: pb.PendingDeleteLedgerInfo, field: str
) -> None:
    verdict = await parts.engine.verify(message)
    assert verdict.skip_reason is SkipReason.INVALID
    assert field in verdict.reason


async def test_batch_verdicts_equal_single_verdicts(topic: World, parts: Any) -> None:
    """VerifyBatch reads these ledgers in its multiRead and their cursor znodes through the
    owner cache, beside the other kinds: each verdict is the single call's."""
    await topic.ledger(7, compacted_meta())
    await topic.ledger(6, compacted_meta())
    await topic.ledger(8, bucket_meta())
    await topic.ledger(9, bucket_meta())
    await topic.ledger(21, data_meta())
    await cursor_znode(topic, COMPACTION, ledger=30, compacted=7)
    await cursor_znode(topic, SUB_CURSOR, ledger=31, buckets={BUCKET_KEY: "9"})
    batch = [
        compacted_pdli(6),
        compacted_pdli(7),
        bucket_pdli(8),
        bucket_pdli(9),
        pdli(21),
        pdli(20),
        pdli(31, component=pb.MANAGED_CURSOR, cursor=SUB_CURSOR),
    ]
    together = [outcome(v) for v in await parts.engine.verify_batch(batch)]
    alone = [outcome(await parts.engine.verify(p)) for p in batch]
    assert together == alone
    assert together[:4] == [
        (Decision.DELETE, "ledger"),
        (Decision.SKIP, "listed"),
        (Decision.DELETE, "ledger"),
        (Decision.SKIP, "listed"),
    ]


MARKER_KEY = Ed25519PrivateKey.generate()


@pytest.mark.parametrize("make", [compacted_pdli, bucket_pdli])
async def test_signed_property_pdlis_pass_the_signature_check(
    topic: World, config: VerifierConfig, store: ZkMetadataStore, s3client: Any, make: Any
) -> None:
    """The canonical encoding covers component and cursor_name: a signed PDLI of these
    kinds verifies, and one whose cursor was changed after signing is FORGED."""
    trusted = TrustedKeys({"m1": MARKER_KEY.public_key()})
    parts = make_parts(replace(config, trusted_keys=trusted, require_signed=True), store, s3client)
    await topic.ledger(7, compacted_meta())
    await topic.ledger(8, bucket_meta())
    await cursor_znode(topic, COMPACTION, compacted=9)
    message = make(7 if make is compacted_pdli else 8, fence=0)
    IntentSigner({"m1": MARKER_KEY}, "m1").sign(message)
    assert (await parts.engine.verify(message)).decision is Decision.DELETE
    message.cursor_name = "sub-a"
    assert (await parts.engine.verify(message)).skip_reason in (
        SkipReason.FORGED,
        SkipReason.INVALID,
    )
    message.cursor_name = COMPACTION if make is compacted_pdli else SUB_CURSOR
    message.component = pb.MANAGED_CURSOR
    assert (await parts.engine.verify(message)).skip_reason is SkipReason.FORGED


# --- shared BookKeeper ----------------------------------------------------------------------


async def test_a_neighbours_active_compaction_cursor_makes_the_ledger_theirs(
    topic: World, east: World, config: VerifierConfig, store: ZkMetadataStore, s3client: Any
) -> None:
    """Our `__compaction` cursor names 9; the neighbour's, of the same name, is active with
    nothing persisted: its live value may be 7, so 7 counts as referenced there."""
    await topic.ledger(7, compacted_meta())
    await cursor_znode(topic, COMPACTION, compacted=9, version=1)
    await cursor_znode(east, COMPACTION, ledger=50)
    parts = build(
        config,
        MetadataZnodeStore(store),
        S3ObjectStore(s3client),
        VerifierMetrics(Metrics()),
        neighbours={EAST: MetadataZnodeStore(east.store)},
    )
    verdict = await parts.engine.verify(compacted_pdli(7, fence=1))
    assert (verdict.skip_reason, verdict.code) == (SkipReason.FOREIGN, "referenced_by_cluster")


async def test_an_absent_cursor_in_a_namespace_unknown_here_is_not_absent(
    world: World, parts: Any
) -> None:
    """No cursor znode, and the namespace has no policies here: the owner may be another
    cluster's sharing this BookKeeper, never "gone"."""
    ml = "other/ns/persistent/orders"
    await world.ledger(8, bucket_meta(topic="persistent://other/ns/orders"))
    verdict = await parts.engine.verify(
        bucket_pdli(8, ml=ml, topic="persistent://other/ns/orders", source=pb.RECONCILER)
    )
    assert (verdict.skip_reason, verdict.code) == (SkipReason.FOREIGN, "namespace_unknown")


async def test_an_absent_compacted_ledger_is_not_found_whatever_the_cursor(
    topic: World, parts: Any
) -> None:
    """Nothing is left to delete: NOT_FOUND (acknowledged) even where the reference is
    unknown."""
    await cursor_znode(topic, COMPACTION, ledger=30)
    verdict = await parts.engine.verify(compacted_pdli(7, fence=0))
    assert verdict.skip_reason is SkipReason.NOT_FOUND


async def test_a_belief_vouches_for_a_missing_key_never_for_another_topic(
    topic: World, parts: Any
) -> None:
    """The believed set applies as for the other kinds: a believed bucket snapshot whose
    metadata leaves the subscription out is DELETE; one naming another topic stays
    MISMATCH; a belief for the cursor ledger of the same cursor vouches for nothing here."""
    left_out = {k: v for k, v in bucket_meta().items() if k != "pulsar/delayedIndexCursor"}
    await topic.ledger(8, left_out)
    await topic.ledger(9, bucket_meta(topic="persistent://public/default/payments"))
    await topic.ledger(10, left_out)
    await cursor_znode(topic, SUB_CURSOR, ledger=31)
    await parts.believed.add([parse_target(bucket_pdli(i)).believed_key for i in (8, 9)])
    await parts.believed.add(
        [parse_target(pdli(10, component=pb.MANAGED_CURSOR, cursor=SUB_CURSOR)).believed_key]
    )
    assert (await parts.engine.verify(bucket_pdli(8))).decision is Decision.DELETE
    assert (await parts.engine.verify(bucket_pdli(9))).skip_reason is SkipReason.MISMATCH
    assert (await parts.engine.verify(bucket_pdli(10))).skip_reason is SkipReason.MISMATCH
