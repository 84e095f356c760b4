"""The generator: deterministic, realistic per the formats reference, orphans labelled."""

from __future__ import annotations

from dataclasses import replace

import pytest

from devstack.simulator.generate import build_model
from devstack.simulator.model import SHADOW_SOURCE, LedgerKind, OrphanKind
from devstack.simulator.orphans import LEGACY_HOSTED
from devstack.simulator.spec import FIRST_LONG_LEDGER_ID, ClusterSpec, IdLayout, OrphanPlan
from services.metadata import DigestType, LedgerState, TopicName, data_object_key
from tests.devstack_sim.conftest import SMALL

MODEL = build_model(SMALL)


def test_same_spec_gives_an_equal_model() -> None:
    """Two builds of one spec are equal, record for record."""
    again = build_model(SMALL)
    assert MODEL.ledgers == again.ledgers
    assert MODEL.managed_ledgers == again.managed_ledgers
    assert MODEL.cursors == again.cursors
    assert MODEL.schemas == again.schemas
    assert MODEL.objects == again.objects
    assert MODEL.planted == again.planted


def test_another_seed_gives_another_model() -> None:
    """A different seed changes the cluster."""
    other = build_model(replace(SMALL, seed=SMALL.seed + 1))
    assert MODEL.managed_ledgers != other.managed_ledgers


def test_short_ids_start_at_zero_and_are_dense() -> None:
    """SHORT ids are 0..n-1, as `idgen/ID-<seq>` hands them out."""
    assert list(range(len(MODEL.ledgers))) == sorted(MODEL.ledgers)


def test_long_ids_start_at_two_to_the_32() -> None:
    """LONG ids come from `idgen-long/HOB-1`: the first is 4294967296."""
    model = build_model(replace(SMALL, id_layout=IdLayout.LONG))
    ids = sorted(model.ledgers)
    assert list(range(FIRST_LONG_LEDGER_ID, FIRST_LONG_LEDGER_ID + len(ids))) == ids


def test_mixed_ids_switch_once_from_short_to_long() -> None:
    """MIXED: short ids first, then long ones, in the share asked for."""
    model = build_model(replace(SMALL, id_layout=IdLayout.MIXED, long_id_share=0.5))
    ids = sorted(model.ledgers)
    short = [i for i in ids if i < FIRST_LONG_LEDGER_ID]
    assert list(range(len(short))) == short
    assert round(len(ids) * (1 - 0.5)) == len(short)


def test_every_ml_list_is_ascending_with_the_last_ledger_open() -> None:
    """Lists ascend; the last LedgerInfo has timestamp 0 and no entries/size; BK says OPEN."""
    for ml in MODEL.managed_ledgers.values():
        if not ml.ledgers or ml.shadow_source:
            continue
        assert sorted(ml.ledger_ids) == list(ml.ledger_ids)
        last = ml.ledgers[-1]
        assert (last.timestamp, last.entries, last.size) == (0, None, None)
        assert MODEL.ledgers[last.ledger_id].state == LedgerState.OPEN


def test_closed_ledgers_agree_with_their_list_entries() -> None:
    """A closed listed ledger's entries and size are its metadata's lastEntryId+1 and length."""
    for ml in MODEL.managed_ledgers.values():
        for info in ml.ledgers[:-1]:
            metadata = MODEL.ledgers[info.ledger_id].metadata
            assert metadata.state == LedgerState.CLOSED
            assert (info.entries, info.size) == (metadata.last_entry_id + 1, metadata.length)


def test_ledgers_carry_pulsar_custom_metadata_by_kind() -> None:
    """Data, cursor and schema ledgers carry the keys Pulsar writes (reference §4)."""
    for ledger in MODEL.ledgers.values():
        meta = {k: v.decode() for k, v in ledger.custom_metadata.items()}
        if ledger.kind is LedgerKind.DATA:
            expected = {
                "application": "pulsar",
                "component": "managed-ledger",
                "pulsar/managed-ledger": ledger.owner,
            }
        elif ledger.kind is LedgerKind.CURSOR:
            expected = {
                "application": "pulsar",
                "component": "managed-ledger",
                "pulsar/managed-ledger": ledger.owner,
                "pulsar/cursor": str(ledger.cursor),
            }
        elif ledger.kind is LedgerKind.SCHEMA:
            expected = {
                "application": "pulsar",
                "component": "schema",
                "pulsar/schemaId": ledger.owner,
            }
        else:
            expected = {}
        assert expected == meta


def test_ledgers_use_crc32c_an_empty_password_and_an_ensemble_of_bookies() -> None:
    """Digest CRC32C, empty password, ensembles drawn from the cluster's bookies."""
    for ledger in MODEL.ledgers.values():
        metadata = ledger.metadata
        assert (metadata.digest_type, metadata.password) == (DigestType.CRC32C, b"")
        for segment in metadata.segments:
            assert set(segment.ensemble) <= set(MODEL.bookies)
            assert SMALL.ensemble_size == len(segment.ensemble)


def test_new_topics_have_an_empty_znode_and_no_ledgers() -> None:
    """A just-created topic is a 0-byte ML znode."""
    new = [ml for ml in MODEL.managed_ledgers.values() if ml.empty_znode]
    assert new, "the small spec should contain a new topic"
    assert all(ml.ledgers == () for ml in new)


def test_partitions_are_separate_managed_ledgers() -> None:
    """Each partition `-partition-<i>` of a partitioned topic has its own ML."""
    for topic in MODEL.partitioned_topics.values():
        for i in range(topic.partitions):
            local = f"{topic.local_name}-partition-{i}"
            name = TopicName("persistent", topic.tenant, topic.namespace, local)
            assert name.managed_ledger_name in MODEL.managed_ledgers


def test_schema_locators_list_every_version_and_ledgers_hold_one_entry() -> None:
    """Versions 0..n-1 each in their own closed one-entry ledger."""
    for schema in MODEL.schemas.values():
        assert list(range(len(schema.versions))) == [v.version for v in schema.versions]
        for version in schema.versions:
            ledger = MODEL.ledgers[version.ledger_id]
            assert (ledger.state, ledger.entries) == (LedgerState.CLOSED, 1)


def test_offloaded_ledgers_have_both_objects_and_lose_bk_only_when_deleted() -> None:
    """Each offload has its data and index objects; `bookkeeperDeleted` ⇒ no BK znode,
    except the planted leftovers."""
    leftovers = {p.ledger_id for p in MODEL.planted_of(OrphanKind.BK_AFTER_OFFLOAD)}
    for ml in MODEL.managed_ledgers.values():
        for info in ml.ledgers:
            if info.offload is None:
                continue
            key = data_object_key(info.offload.uuid, info.ledger_id)
            assert {key, key + "-index"} <= set(MODEL.objects)
            in_bk = MODEL.ledgers[info.ledger_id].in_bookkeeper
            gone = info.offload.bookkeeper_deleted and info.ledger_id not in leftovers
            assert (not gone) == in_bk


def test_object_user_metadata_names_cluster_role_and_ml() -> None:
    """User metadata as the offloader writes it (reference §7.1)."""
    obj = next(o for o in MODEL.objects.values() if o.role == "index")
    assert {
        "s3managedledgeroffloaderformatversion": "1",
        "pulsarclustername": SMALL.cluster_name,
        "role": "index",
        "ManagedLedgerName": obj.ml_name,
    }.items() <= dict(obj.user_metadata).items()


def test_every_orphan_kind_is_planted_and_labelled() -> None:
    """OrphanPlan.some() plants one of each kind and no legacy artifact; deletable ones are
    exactly the six."""
    legacy = set(LEGACY_HOSTED.values())
    assert {kind: 0 if kind in legacy else 1 for kind in OrphanKind} == {
        kind: len(MODEL.planted_of(kind)) for kind in OrphanKind
    }
    deletable = {p.kind for p in MODEL.planted if p.deletable}
    assert {
        OrphanKind.UNLISTED_DATA,
        OrphanKind.DELETED_TOPIC,
        OrphanKind.STALE_CURSOR,
        OrphanKind.UNLISTED_SCHEMA,
        OrphanKind.UNREFERENCED_OFFLOAD,
        OrphanKind.BK_AFTER_OFFLOAD,
    } == deletable


@pytest.mark.parametrize(
    "kind",
    [
        OrphanKind.UNLISTED_DATA,
        OrphanKind.DELETED_TOPIC,
        OrphanKind.STALE_CURSOR,
        OrphanKind.UNLISTED_SCHEMA,
        OrphanKind.YOUNG,
        OrphanKind.NO_PULSAR_METADATA,
    ],
)
def test_unreferenced_ledger_orphans_are_in_bk_and_referenced_by_nothing(
    kind: OrphanKind,
) -> None:
    """The planted ledger has a BK znode and no ML, cursor or locator lists it."""
    (planted,) = MODEL.planted_of(kind)
    assert planted.ledger_id is not None
    ledger = MODEL.ledgers[planted.ledger_id]
    assert (ledger.in_bookkeeper, ledger.referenced) == (True, False)
    assert planted.ledger_id not in MODEL.referenced_ledger_ids()


def test_deleted_topic_orphans_name_an_ml_that_does_not_exist() -> None:
    (planted,) = MODEL.planted_of(OrphanKind.DELETED_TOPIC)
    assert planted.ml_name not in MODEL.managed_ledgers
    assert (
        planted.ml_name.encode()
        == MODEL.ledgers[planted.ledger_id or 0].custom_metadata["pulsar/managed-ledger"]
    )


def test_stale_cursor_ledger_is_not_the_cursors_current_one() -> None:
    """The cursor named in the ledger exists and points elsewhere (or to -1)."""
    (planted,) = MODEL.planted_of(OrphanKind.STALE_CURSOR)
    cursor = MODEL.cursors[(planted.ml_name, planted.note)]
    assert planted.ledger_id != cursor.cursors_ledger_id
    assert MODEL.ledgers[planted.ledger_id or 0].kind == LedgerKind.CURSOR


def test_unlisted_schema_ledger_names_an_existing_schema() -> None:
    (planted,) = MODEL.planted_of(OrphanKind.UNLISTED_SCHEMA)
    schema = MODEL.schemas[planted.note]
    assert planted.ledger_id not in schema.ledger_ids


def test_bk_leftover_is_listed_offloaded_and_bookkeeper_deleted() -> None:
    """The listed ledger says `bookkeeperDeleted`, yet its BK znode is still there."""
    (planted,) = MODEL.planted_of(OrphanKind.BK_AFTER_OFFLOAD)
    ml = MODEL.managed_ledgers[planted.ml_name]
    (info,) = [i for i in ml.ledgers if i.ledger_id == planted.ledger_id]
    assert info.offload is not None
    assert (info.offload.complete, info.offload.bookkeeper_deleted) == (True, True)
    assert MODEL.ledgers[info.ledger_id].in_bookkeeper


def test_unreferenced_offload_objects_match_no_listed_uuid() -> None:
    """The pair's (uuid, ledger id) is not any listed ledger's offload."""
    (planted,) = MODEL.planted_of(OrphanKind.UNREFERENCED_OFFLOAD)
    listed = {
        (info.offload.uuid, info.ledger_id)
        for ml in MODEL.managed_ledgers.values()
        for info in ml.ledgers
        if info.offload
    }
    assert len(planted.object_keys) == 2
    for key in planted.object_keys:
        obj = MODEL.objects[key]
        assert (obj.uuid, obj.ledger_id) not in listed


def test_young_ledgers_have_the_highest_ids() -> None:
    """Young ledgers are allocated last, so the writer can write them after the boundary."""
    young = {led.ledger_id for led in MODEL.ledgers.values() if led.young}
    (planted,) = MODEL.planted_of(OrphanKind.YOUNG)
    assert {planted.ledger_id} == young
    assert max(MODEL.ledgers) in young


def test_shadow_topic_lists_what_its_source_dropped() -> None:
    """The shadow ML has PULSAR.SHADOW_SOURCE and lists the planted ledger; the source not."""
    (planted,) = MODEL.planted_of(OrphanKind.SHADOW_REFERENCED)
    shadow = MODEL.managed_ledgers[planted.ml_name]
    assert planted.note == dict(shadow.properties)[SHADOW_SOURCE]
    assert planted.ledger_id in shadow.ledger_ids
    source = MODEL.ledgers[planted.ledger_id or 0].owner
    assert planted.ledger_id not in MODEL.managed_ledgers[source].ledger_ids
    assert MODEL.ledgers[planted.ledger_id or 0].referenced


def test_other_cluster_objects_name_another_cluster() -> None:
    (planted,) = MODEL.planted_of(OrphanKind.OTHER_CLUSTER_OBJECTS)
    names = {MODEL.objects[key].user_metadata["pulsarclustername"] for key in planted.object_keys}
    assert {f"{SMALL.cluster_name}-other"} == names


def test_v2_share_makes_some_ledgers_text_format() -> None:
    """With v2_share=1 every ledger is format 2 (and has no cToken); by default all are 3."""
    v2 = build_model(replace(SMALL, v2_share=1.0))
    assert {(2, 0)} == {
        (led.metadata.format_version, led.metadata.ctoken) for led in v2.ledgers.values()
    }
    assert {3} == {led.metadata.format_version for led in MODEL.ledgers.values()}


def test_all_topics_new_cannot_host_orphans() -> None:
    from services.core.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        build_model(ClusterSpec(new_topic_share=1.0, orphans=OrphanPlan(unlisted_data=1)))


def test_offload_of_and_object_keys_of_find_a_ledgers_copy() -> None:
    """The lookup helpers return the listed offload and both objects of its uuid."""
    ml = next(m for m in MODEL.managed_ledgers.values() if m.ledgers and m.ledgers[0].offload)
    info = ml.ledgers[0]
    assert info.offload == MODEL.offload_of(info.ledger_id)
    assert info.offload is not None
    key = data_object_key(info.offload.uuid, info.ledger_id)
    assert {key, key + "-index"} <= set(MODEL.object_keys_of(info.ledger_id))
    assert MODEL.offload_of(ml.ledgers[-1].ledger_id) is None
