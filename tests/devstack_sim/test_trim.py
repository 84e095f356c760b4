"""trim(): what a broker's retention trim would remove, per tier."""

from __future__ import annotations

import pytest

from devstack.simulator.generate import build_model
from devstack.simulator.model import OrphanKind
from devstack.simulator.trim import apply_trim, trim
from services.core.errors import InvalidArgument, NotFound
from services.metadata import data_object_key, index_object_key
from tests.devstack_sim.conftest import SMALL

MODEL = build_model(SMALL)


def _offloaded_ml() -> str:
    """An ML whose first ledger is offloaded and listed by no other ML."""
    shadowed = {
        ledger_id
        for ml in MODEL.managed_ledgers.values()
        if ml.shadow_source
        for ledger_id in ml.ledger_ids
    }
    return next(
        ml.name
        for ml in MODEL.managed_ledgers.values()
        if ml.ledgers and ml.ledgers[0].offload and ml.ledger_ids[0] not in shadowed
    )


def test_trim_removes_the_oldest_ledgers_and_keeps_the_rest() -> None:
    """The n oldest leave the list; the remaining list is the tail, current ledger last."""
    ml = MODEL.managed_ledgers[_offloaded_ml()]
    result = trim(MODEL, ml.name, 1)
    assert ml.ledger_ids[:1] == result.ledger_ids
    assert ml.ledger_ids[1:] == result.after.ledger_ids


def test_trim_accepts_a_topic_name() -> None:
    """`persistent://t/ns/x` resolves to its ML."""
    ml = MODEL.managed_ledgers[_offloaded_ml()]
    assert trim(MODEL, ml.name, 1) == trim(MODEL, ml.topic, 1)


def test_offloaded_ledger_lists_both_objects_and_bk_only_if_not_deleted() -> None:
    """OFFLOAD tier whenever a uuid is set; BK tier unless bookkeeperDeleted."""
    ml = MODEL.managed_ledgers[_offloaded_ml()]
    (item,) = trim(MODEL, ml.name, 1).trimmed
    offload = item.info.offload
    assert offload is not None
    expected_keys = (
        data_object_key(offload.uuid, item.ledger_id),
        index_object_key(offload.uuid, item.ledger_id),
    )
    assert expected_keys == item.object_keys
    assert (not offload.bookkeeper_deleted) == item.delete_from_bookkeeper
    assert item.delete_offloaded


def test_never_offloaded_ledger_has_only_the_bookkeeper_tier() -> None:
    """A ledger without an offload context: BK tier only, no objects."""
    ml = next(
        m
        for m in MODEL.managed_ledgers.values()
        if len(m.ledgers) > 1 and m.ledgers[0].offload is None and not m.shadow_source
    )
    (item,) = trim(MODEL, ml.name, 1).trimmed
    assert (item.delete_from_bookkeeper, item.delete_offloaded, item.object_keys) == (
        True,
        False,
        (),
    )


def test_the_current_ledger_is_never_trimmed() -> None:
    """n may not reach the last (open) ledger."""
    ml = MODEL.managed_ledgers[_offloaded_ml()]
    with pytest.raises(InvalidArgument):
        trim(MODEL, ml.name, len(ml.ledgers))


def test_unknown_topic_is_not_found() -> None:
    with pytest.raises(NotFound):
        trim(MODEL, "persistent://public/default/no-such-topic", 1)


def test_ledgers_a_shadow_still_lists_are_flagged() -> None:
    """Trimming a source ledger its shadow also lists marks it still referenced."""
    (planted,) = MODEL.planted_of(OrphanKind.SHADOW_REFERENCED)
    shadow = MODEL.managed_ledgers[planted.ml_name]
    source = MODEL.managed_ledgers[MODEL.ledgers[planted.ledger_id or 0].owner]
    result = trim(MODEL, source.name, 1)
    assert [source.ledger_ids[0] in shadow.ledger_ids] == [
        t.still_referenced for t in result.trimmed
    ]


def test_apply_trim_drops_deleted_ledgers_and_objects() -> None:
    """After the trim's deletions, the model no longer holds the ledger or its objects."""
    ml = MODEL.managed_ledgers[_offloaded_ml()]
    result = trim(MODEL, ml.name, 1)
    after = apply_trim(MODEL, result)
    (item,) = result.trimmed
    assert item.ledger_id not in after.ledgers
    assert not set(item.object_keys) & set(after.objects)
    assert result.after == after.managed_ledgers[ml.name]
    assert item.ledger_id in MODEL.ledgers  # the original is untouched
