"""Compacted-topic ledgers and bucket snapshots: marked on the cursor znode that names them.

The cursor znodes model `ManagedCursorImpl`'s writes: a closed `__compaction` cursor keeps the
`CompactedTopicLedger` mark-delete property (`AbstractTwoPhaseCompactor.phaseTwo`) in the
znode with `cursorsLedgerId = -1`; an active one keeps it in its cursor ledger. A
subscription's cursor keeps its bucket snapshots as `cursorProperties`
(`BucketDelayedDeliveryTracker`, `BookkeeperBucketSnapshotStorage`).
"""

from __future__ import annotations

import pytest

from services.core.errors import FailedPrecondition, InvalidArgument
from services.marker.marking import Marker
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.marker.servicer import to_request
from services.metadata import ManagedCursorInfo, decode_cursor_info, encode_cursor_info
from tests.marker.builders import ML_NAME, ML_PATH, TOPIC
from tests.marker.fakes import FakePublisher, FakeStore
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

COMPACTION_PATH = f"{ML_PATH}/__compaction"
SUB = "delayed+sub"
SUB_PATH = f"{ML_PATH}/{SUB}"
KEY_A = "#pulsar.internal.delayed.bucket_3_9"
KEY_B = "#pulsar.internal.delayed.bucket_10_14"


def compaction_bytes(compacted: int | None, *, cursor_ledger: int = -1) -> bytes:
    """The `__compaction` cursor znode (`ManagedCursorImpl.persistPositionMetaStore`)."""
    info = ManagedCursorInfo(cursorsLedgerId=cursor_ledger, markDeleteLedgerId=5)
    if compacted is not None:
        info.properties.add(name="CompactedTopicLedger", value=compacted)
    return encode_cursor_info(info)


def subscription_bytes(buckets: dict[str, str], *, cursor_ledger: int = 60) -> bytes:
    """A subscription's cursor znode with its bucket snapshots (`Bucket.putBucketKeyId` →
    `ManagedCursorImpl.putCursorProperty`)."""
    info = ManagedCursorInfo(cursorsLedgerId=cursor_ledger, markDeleteLedgerId=5)
    info.cursorProperties.add(name="other", value="kept")
    for key, value in buckets.items():
        info.cursorProperties.add(name=key, value=value)
    return encode_cursor_info(info)


def request(component: int, *ids: int, cursor: str, **kwargs: object) -> MarkRequest:
    owner = resolve_owner(
        component, topic_name=TOPIC, ml_name=ML_NAME, cursor_name=cursor, schema_id=""
    )
    return MarkRequest(owner=owner, ledger_ids=ids, request_id="req-p", **kwargs)  # type: ignore[arg-type]


def compacted(*ids: int, **kwargs: object) -> MarkRequest:
    return request(_pd.COMPACTED_LEDGER, *ids, cursor="", **kwargs)


def bucket(*ids: int, **kwargs: object) -> MarkRequest:
    return request(_pd.DELAYED_INDEX_BUCKET, *ids, cursor=SUB, **kwargs)


# --- DELAYED_INDEX_BUCKET -------------------------------------------------------------------


async def test_marker_writes_removes_the_bucket_entry(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(SUB_PATH, subscription_bytes({KEY_A: "21", KEY_B: "22"}), version=4)
    result = await marker.mark(bucket(21))
    info = decode_cursor_info(store.nodes[SUB_PATH].data, path=SUB_PATH)
    assert [(p.name, p.value) for p in info.cursorProperties] == [("other", "kept"), (KEY_B, "22")]
    assert info.cursorsLedgerId == 60
    assert (result.written, result.new_version) == (True, 5)
    [pdli] = publisher.pdlis
    assert (pdli.component, pdli.cursor_name, pdli.topic_name, pdli.fence_token) == (
        _pd.DELAYED_INDEX_BUCKET,
        SUB,
        TOPIC,
        5,
    )
    assert pdli.ledger_type == _pd.LEDGER


async def test_caller_writes_records_the_token_of_the_caller_s_write(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(SUB_PATH, subscription_bytes({KEY_A: "21"}), version=4)
    result = await marker.mark(bucket(21, caller_writes=True))
    assert (result.written, result.fence_token) == (False, 5)
    assert [p.fence_token for p in publisher.pdlis] == [5]
    assert store.nodes[SUB_PATH].version == 4


async def test_bucket_not_named_is_not_referenced(marker: Marker, store: FakeStore) -> None:
    store.put(SUB_PATH, subscription_bytes({KEY_A: "21"}))
    result = await marker.mark(bucket(23))
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(23, _mk.NOT_REFERENCED)]


async def test_reconciler_bucket_still_named_is_refused(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(SUB_PATH, subscription_bytes({KEY_A: "21"}), version=2)
    result = await marker.mark(bucket(21, 23, source=_pd.RECONCILER))
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(21, _mk.STILL_REFERENCED)]
    assert [(p.ledger_id, p.fence_token) for p in publisher.pdlis] == [(23, 2)]
    assert not result.written


async def test_a_ledger_named_by_another_property_cannot_be_unlinked(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(SUB_PATH, subscription_bytes({"not-a-bucket": "21"}))
    result = await marker.mark(bucket(21))
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(21, _mk.CANNOT_UNLINK)]
    assert publisher.pdlis == []


# --- COMPACTED_LEDGER -----------------------------------------------------------------------


async def test_closed_compaction_cursor_marker_writes_removes_the_property(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(COMPACTION_PATH, compaction_bytes(31), version=1)
    result = await marker.mark(compacted(31))
    info = decode_cursor_info(store.nodes[COMPACTION_PATH].data, path=COMPACTION_PATH)
    assert list(info.properties) == []
    assert info.markDeleteLedgerId == 5
    [pdli] = publisher.pdlis
    assert (pdli.component, pdli.cursor_name, pdli.fence_token, result.new_version) == (
        _pd.COMPACTED_LEDGER,
        "__compaction",
        2,
        2,
    )


async def test_active_compaction_cursor_refuses_marker_writes(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(COMPACTION_PATH, compaction_bytes(31, cursor_ledger=70))
    with pytest.raises(FailedPrecondition, match="active"):
        await marker.mark(compacted(31))
    assert publisher.pdlis == []


async def test_active_compaction_cursor_accepts_caller_writes(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """The broker's markDelete moves the property in the cursor ledger: the marker records
    the intent, the verifier waits until the znode shows it."""
    store.put(COMPACTION_PATH, compaction_bytes(31, cursor_ledger=70), version=3)
    result = await marker.mark(compacted(31, caller_writes=True))
    assert [p.fence_token for p in publisher.pdlis] == [4]
    assert not result.written


@pytest.mark.parametrize(
    ("persisted", "cursor_ledger", "refused"),
    [
        (31, -1, True),  # named in the znode
        (33, -1, False),  # a closed cursor names a newer one
        (33, 70, False),  # active, persisted value above: the reference only moves forward
        (31, 70, True),  # active, the persisted value is this ledger
        (29, 70, True),  # active, below: the live value may be this ledger
        (None, 70, True),  # active, nothing persisted
    ],
)
async def test_reconciler_compacted_ledger(
    marker: Marker,
    store: FakeStore,
    publisher: FakePublisher,
    persisted: int | None,
    cursor_ledger: int,
    refused: bool,
) -> None:
    store.put(COMPACTION_PATH, compaction_bytes(persisted, cursor_ledger=cursor_ledger))
    result = await marker.mark(compacted(31, source=_pd.RECONCILER))
    reasons = [n.reason for n in result.not_marked]
    assert reasons == ([_mk.STILL_REFERENCED] if refused else [])
    assert len(publisher.pdlis) == (0 if refused else 1)


async def test_reconciler_compacted_ledger_of_a_deleted_topic(
    marker: Marker, publisher: FakePublisher
) -> None:
    """No `__compaction` znode (the topic was deleted, apache/pulsar #21745): sent, token 0."""
    await marker.mark(compacted(31, source=_pd.RECONCILER))
    assert [(p.ledger_id, p.fence_token) for p in publisher.pdlis] == [(31, 0)]


# --- requests -------------------------------------------------------------------------------


def _message(**fields: object) -> _mk.MarkLedgersRequest:
    base: dict[str, object] = {"managed_ledger_name": ML_NAME, "ledger_ids": [1]}
    return _mk.MarkLedgersRequest(**(base | fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"component": _pd.COMPACTED_LEDGER, "cursor_name": "sub-a"}, "cursor_name"),
        ({"component": _pd.DELAYED_INDEX_BUCKET}, "cursor_name"),
        ({"component": _pd.DELAYED_INDEX_BUCKET, "cursor_name": "a/b"}, "cursor_name"),
        (
            {"component": _pd.DELAYED_INDEX_BUCKET, "cursor_name": SUB, "new_cursor_ledger_id": 3},
            "new_cursor_ledger_id",
        ),
        (
            {
                "component": _pd.COMPACTED_LEDGER,
                "source": _pd.RECONCILER,
                "ledger_ids": [],
                "reconciler_ledgers": [
                    _mk.ReconcilerLedger(ledger_id=1, tiers=[_pd.OFFLOAD_LEDGER])
                ],
            },
            "reconciler_ledgers[0].tiers",
        ),
    ],
)
def test_bad_property_owner_requests_name_the_field(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        to_request(_message(**fields), max_batch=10)
    assert caught.value.field == field


def test_compacted_request_defaults_to_the_compaction_cursor() -> None:
    parsed = to_request(_message(component=_pd.COMPACTED_LEDGER), max_batch=10)
    assert (parsed.owner.path, parsed.owner.topic_name) == (COMPACTION_PATH, TOPIC)
