"""The legacy profile: what older and newer Pulsar versions leave behind, as their sources
write it (the table "What real Pulsar leaves behind" at the end of the formats reference)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from devstack.simulator.generate import build_model
from devstack.simulator.model import LedgerInfo, OrphanKind
from devstack.simulator.readback import expected, read_cluster
from devstack.simulator.s3 import S3ObjectStore
from devstack.simulator.spec import (
    ClusterSpec,
    Compression,
    LegacyPlan,
    OffloadDriver,
    OrphanPlan,
    PathWriter,
    legacy_spec,
)
from devstack.simulator.writer import write_cluster
from services.metadata import (
    LedgerState,
    ZkMetadataStore,
    cursor_path,
    decode_ledger_metadata,
    managed_ledger_path,
    parse_index_header,
)
from services.metadata.paths import (
    LedgerLayout,
    LedgerPaths,
    flat_path,
    hybrid_hierarchical_path,
    layout_text,
    long_hierarchical_path,
)
from tests.devstack_sim.conftest import SMALL
from tombstone.formats import bookkeeper_pb2 as _bk

LEGACY = legacy_spec(
    seed=SMALL.seed,
    tenants=1,
    namespaces_per_tenant=2,
    topics_per_namespace=3,
    partitions=(2, 2),
    ledgers_per_topic=(2, 4),
    cursors_per_topic=(1, 2),
    new_topic_share=0.15,
)
MODEL = build_model(LEGACY)


def _listed(ledger_id: int) -> LedgerInfo:
    return next(
        info
        for ml in MODEL.managed_ledgers.values()
        if not ml.shadow_source
        for info in ml.ledgers
        if info.ledger_id == ledger_id
    )


def test_the_legacy_profile_plants_every_artifact_once() -> None:
    """One of each orphan, look-alike and legacy artifact; LZ4; long LAYOUT, mixed writers."""
    assert dict.fromkeys(OrphanKind, 1) == {k: len(MODEL.planted_of(k)) for k in OrphanKind}
    assert (LEGACY.compression, LEGACY.layout, LEGACY.path_writer) == (
        Compression.LZ4,
        LedgerLayout.LONG_HIERARCHICAL,
        PathWriter.MIXED,
    )


@pytest.mark.parametrize("kind", [OrphanKind.STALE_CURSOR, OrphanKind.OPEN_CURSOR_UNSUBSCRIBED])
def test_unlinked_cursor_ledgers_are_left_open(kind: OrphanKind) -> None:
    """`ManagedCursorImpl.switchToNewLedger` and `asyncDeleteCursorLedger` delete the old
    cursor ledger by id without closing it: a failed delete leaves it OPEN, unreferenced."""
    (planted,) = MODEL.planted_of(kind)
    ledger = MODEL.ledgers[planted.ledger_id or 0]
    assert (ledger.state, ledger.referenced, ledger.in_bookkeeper) == (
        LedgerState.OPEN,
        False,
        True,
    )
    assert ledger.custom_metadata["pulsar/cursor"] == (ledger.cursor or "").encode()
    if kind is OrphanKind.OPEN_CURSOR_UNSUBSCRIBED:
        assert (planted.ml_name, ledger.cursor) not in MODEL.cursors


def test_pre_2_2_ledger_is_listed_closed_and_has_no_custom_metadata() -> None:
    """Custom metadata came with Pulsar 2.3.0 (`LedgerMetadataUtils`): a ledger created by
    2.2 or older carries none, and its topic still lists it."""
    (planted,) = MODEL.planted_of(OrphanKind.PRE_2_2_LEDGER)
    ledger = MODEL.ledgers[planted.ledger_id or 0]
    assert (dict(ledger.custom_metadata), ledger.state, ledger.referenced) == (
        {},
        LedgerState.CLOSED,
        True,
    )
    assert _listed(ledger.ledger_id).offload is None


def test_2_1_offload_has_no_driver_metadata_and_objects_only_version_keys() -> None:
    """Pulsar 2.1's OffloadContext holds uidMsb/uidLsb/complete only; its objects carry only
    the `s3managedledgeroffloader*` keys, in the default bucket; the ledger has no custom
    metadata (2.1 < 2.3)."""
    (planted,) = MODEL.planted_of(OrphanKind.OFFLOAD_2_1)
    offload = _listed(planted.ledger_id or 0).offload
    assert offload is not None
    assert (offload.driver_name, offload.driver_properties, offload.bucket) == ("", (), "")
    assert (offload.complete, offload.bookkeeper_deleted, offload.timestamp) == (True, False, 0)
    for key in planted.object_keys:
        obj = MODEL.objects[key]
        assert obj.bucket == LEGACY.bucket
        assert set(obj.user_metadata) == {
            "s3managedledgeroffloaderformatversion",
            "s3managedledgeroffloadersoftwareversion",
            "s3managedledgeroffloadersoftwaregitsha",
        }
    assert dict(MODEL.ledgers[planted.ledger_id or 0].custom_metadata) == {}


def test_pre_2_10_objects_have_no_owner_metadata_but_the_index_names_the_owner() -> None:
    """Before 2.10 (PR #14907) objects carry no `managedledgername` / `pulsarclustername`; the
    index object's segment metadata (`OffloadIndexBlockImpl`, reference §7.1) still holds the
    ledger's custom metadata, `pulsar/managed-ledger` included."""
    (planted,) = MODEL.planted_of(OrphanKind.OBJECTS_PRE_2_10)
    offload = _listed(planted.ledger_id or 0).offload
    assert offload is not None
    assert offload.driver_name == "aws-s3"
    index = next(MODEL.objects[k] for k in planted.object_keys if k.endswith("-index"))
    assert "pulsarclustername" not in index.user_metadata
    assert "ManagedLedgerName" not in index.user_metadata
    assert index.source.custom_metadata["pulsar/managed-ledger"] == planted.ml_name.encode()


async def test_legacy_cluster_reads_back_exactly_the_model(
    store: ZkMetadataStore, objects: S3ObjectStore
) -> None:
    """Everything written (LZ4 znodes, long and hybrid paths, 2.1 contexts, pre-2.10
    objects) reads back through the metadata layer as the model says."""
    model = await write_cluster(LEGACY, store=store, s3_client=objects, concurrency=32)
    back = await read_cluster(store, s3_client=objects, buckets=(LEGACY.bucket,))
    assert expected(model) == back
    layouts = set(back.ledger_layouts.values())
    assert {LedgerLayout.HIERARCHICAL, LedgerLayout.LONG_HIERARCHICAL} == layouts


async def test_layout_names_the_bookkeeper_manager_and_pulsar_writes_hybrid_paths(
    store: ZkMetadataStore, objects: S3ObjectStore
) -> None:
    """LAYOUT holds `LedgerLayout.serialize`'s text for the long manager; the older ledgers
    sit at long paths (`LongHierarchicalLedgerManager`), the newer ones at hybrid paths
    (`PulsarLedgerManager.getLedgerPath`, Pulsar >= 2.10, whatever LAYOUT says)."""
    model = await write_cluster(LEGACY, store=store, s3_client=objects, concurrency=32)
    layout = (await store.get("/ledgers/LAYOUT")).data
    assert layout == layout_text(LedgerLayout.LONG_HIERARCHICAL)
    ids = [led.ledger_id for led in model.bookkeeper_ledgers()]
    oldest, newest = ids[0], ids[-1]
    assert await store.exists(f"/ledgers/{long_hierarchical_path(oldest)}") is not None
    assert await store.exists(f"/ledgers/{hybrid_hierarchical_path(oldest)}") is None
    assert await store.exists(f"/ledgers/{hybrid_hierarchical_path(newest)}") is not None


async def test_flat_layout_written_by_bookkeeper_puts_ledgers_under_the_root(
    store: ZkMetadataStore, objects: S3ObjectStore
) -> None:
    """A pre-4.7 cluster (`FlatLedgerManager`): `L%010d` directly under the root."""
    spec = replace(
        SMALL,
        layout=LedgerLayout.FLAT,
        path_writer=PathWriter.BOOKKEEPER,
        orphans=OrphanPlan(),
        offloaded_share=0.0,
    )
    model = await write_cluster(spec, store=store, s3_client=objects, concurrency=32)
    assert (await store.get("/ledgers/LAYOUT")).data == layout_text(LedgerLayout.FLAT)
    for ledger in model.bookkeeper_ledgers():
        assert await store.exists(f"/ledgers/{flat_path(ledger.ledger_id)}") is not None
    assert expected(model) == await read_cluster(store)


async def test_lz4_ml_and_cursor_znodes_carry_the_magic(
    store: ZkMetadataStore, objects: S3ObjectStore
) -> None:
    """Pulsar 5.0 compresses ML and cursor info with LZ4 by default
    (`managedLedgerInfoCompressionType`, `managedCursorInfoCompressionType`): 0x4778 first."""
    model = await write_cluster(LEGACY, store=store, s3_client=objects, concurrency=32)
    ml = next(m for m in model.managed_ledgers.values() if m.ledgers)
    assert (await store.get(managed_ledger_path(ml.name))).data[:2] == b"\x47\x78"
    ml_name, cursor = next(iter(model.cursors))
    assert (await store.get(cursor_path(ml_name, cursor))).data[:2] == b"\x47\x78"


async def test_pre_2_10_index_object_carries_the_ledger_metadata(
    store: ZkMetadataStore, objects: S3ObjectStore
) -> None:
    """The index object read from S3 parses (magic 0xDE47DE47) and its segment metadata is
    the ledger's LedgerMetadataFormat with the owner in its custom metadata."""
    model = await write_cluster(LEGACY, store=store, s3_client=objects, concurrency=32)
    (planted,) = model.planted_of(OrphanKind.OBJECTS_PRE_2_10)
    key = next(k for k in planted.object_keys if k.endswith("-index"))
    body = await objects.get_object(bucket=LEGACY.bucket, key=key)
    header = parse_index_header(body)
    segment = _bk.LedgerMetadataFormat.FromString(header.segment_metadata)
    custom = {entry.key: entry.value for entry in segment.customMetadata}
    assert custom["pulsar/managed-ledger"] == planted.ml_name.encode()
    assert {k.lower() for k in await objects.head_metadata(bucket=LEGACY.bucket, key=key)} == {
        "s3managedledgeroffloaderformatversion",
        "s3managedledgeroffloadersoftwareversion",
        "s3managedledgeroffloadersoftwaregitsha",
    }
    ledger = model.ledgers[planted.ledger_id or 0]
    path = LedgerPaths(layout=ledger.path_layout).ledger_path(ledger.ledger_id)
    data = (await store.get(path)).data
    decoded = decode_ledger_metadata(data, ledger_id=ledger.ledger_id, path=path)
    assert decoded == ledger.metadata


def test_legacy_plan_counts_and_spec_checks() -> None:
    """`LegacyPlan.some(n)` seeds n of each; legacy offloads need the S3 driver."""
    assert LegacyPlan.some(2).total() == 8
    with pytest.raises(Exception, match="legacy"):
        ClusterSpec(legacy=LegacyPlan(offload_2_1=1), offload_driver=OffloadDriver.FILESYSTEM)
