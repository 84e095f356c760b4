"""The demo's final check and per-artifact summary, on the legacy profile's model."""

from __future__ import annotations

from devstack import demo_outcome
from devstack.demo_outcome import BOOKKEEPER, OFFLOAD, Unlinked
from devstack.simulator import legacy_spec
from devstack.simulator.generate import build_model
from devstack.simulator.model import OrphanKind
from devstack.simulator.readback import ReadBack, expected
from devstack.simulator.trim import trim

MODEL = build_model(legacy_spec(seed=7, tenants=1, namespaces_per_tenant=2))


def _planted(kind: OrphanKind) -> int:
    (planted,) = MODEL.planted_of(kind)
    assert planted.ledger_id is not None
    return planted.ledger_id


def _trimmed_all() -> list[Unlinked]:
    unlinked: list[Unlinked] = []
    for ml in MODEL.managed_ledgers.values():
        if len(ml.ledgers) >= 2 and not ml.shadow_source:
            result = trim(MODEL, ml.name, len(ml.ledgers) - 1)
            unlinked += demo_outcome.from_trim(MODEL, result.trimmed)
    return unlinked


def _after(unlinked: list[Unlinked], *, keep: set[tuple[int, str]]) -> ReadBack:
    """The cluster after every unlinked tier was deleted except `keep`."""
    now = expected(MODEL)
    for item in unlinked:
        if item.still_referenced or (item.ledger_id, item.tier) in keep:
            continue
        if item.tier == BOOKKEEPER:
            now.ledgers.pop(item.ledger_id, None)
        for key in item.object_keys:
            now.objects.pop(key, None)
    return now


def test_legacy_artifacts_are_named_by_kind_and_tier() -> None:
    """Each legacy ledger a trim unlinks is labelled by the artifact it is, per tier."""
    names = {(u.ledger_id, u.tier): u.artifact for u in _trimmed_all()}
    pre22 = _planted(OrphanKind.PRE_2_2_LEDGER)
    old21 = _planted(OrphanKind.OFFLOAD_2_1)
    pre210 = _planted(OrphanKind.OBJECTS_PRE_2_10)
    assert names[(pre22, BOOKKEEPER)].startswith("pre-2.2 ledger (no custom metadata) @ ")
    assert names[(old21, OFFLOAD)] == "2.1 offload, objects (no driverMetadata)"
    assert names[(pre210, OFFLOAD)] == "pre-2.10 objects (no owner metadata)"
    assert names[(old21, BOOKKEEPER)].startswith("2.1 offload, BookKeeper copy")


def test_dead_lettered_counts_for_l1_and_kept_does_not() -> None:
    """L1: deleted or dead-lettered with a reason is fine; kept (acknowledged, left behind)
    is a leak; a ledger a shadow topic still lists must be kept."""
    unlinked = _trimmed_all()
    pre22 = _planted(OrphanKind.PRE_2_2_LEDGER)
    old21 = _planted(OrphanKind.OFFLOAD_2_1)
    keep = {(pre22, BOOKKEEPER), (old21, OFFLOAD)}
    now = _after(unlinked, keep=keep)
    letters = {(pre22, BOOKKEEPER): "unsupported"}
    assert [f"L1: offload copy of unlinked ledger {old21} remains"] == demo_outcome.problems(
        MODEL, unlinked, now, letters
    )
    lines = demo_outcome.artifact_lines(MODEL, unlinked, now, letters)
    (pre22_line,) = [line for line in lines if "pre-2.2" in line]
    assert pre22_line.endswith(": dead-lettered(unsupported) 1")
    (old21_line,) = [line for line in lines if "2.1 offload, objects" in line]
    assert old21_line.endswith(": kept 1")


def test_a_deleted_ledger_nobody_unlinked_breaks_s1() -> None:
    """S1: a planted orphan or a listed ledger the protocol never unlinked must remain."""
    now = expected(MODEL)
    victim = _planted(OrphanKind.OPEN_CURSOR_UNSUBSCRIBED)
    del now.ledgers[victim]
    assert [f"S1: ledger {victim} was deleted"] == demo_outcome.problems(MODEL, [], now, {})


def test_cursor_ledgers_are_labelled_open() -> None:
    """A cursor ledger the demo unlinks is left OPEN, as `asyncDeleteCursorLedger` does."""
    ledger_id = next(
        c.cursors_ledger_id for c in MODEL.cursors.values() if c.cursors_ledger_id >= 0
    )
    item = demo_outcome.cursor_ledger(MODEL, ledger_id)
    assert item.artifact.startswith("cursor ledger left OPEN (asyncDeleteCursorLedger) @ ")
