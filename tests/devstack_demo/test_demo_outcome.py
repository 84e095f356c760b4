"""The demo's final check and per-artifact summary, on the legacy profile's model."""

from __future__ import annotations

from devstack import demo_outcome
from devstack.demo_outcome import BOOKKEEPER, OFFLOAD, Unlinked
from devstack.neighbour import NeighbourLedger, PlantedNeighbour, Role
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


def _neighbour() -> PlantedNeighbour:
    """A neighbour whose ledgers follow the model's ids, as the demo plants it."""
    first = max(MODEL.ledgers) + 1
    roles = (Role.ORPHAN, Role.SCHEMA, Role.CLOSED, Role.CURSOR, Role.CURRENT)
    return PlantedNeighbour(
        cluster="east",
        chroot="/neighbour",
        servers="127.0.0.1:2181",
        ledgers_root=MODEL.spec.ledgers_root,
        ml_name="east-only/invoicing/persistent/invoices",
        cursor="billing",
        schema_id="east-only/invoicing/invoices",
        ledgers=tuple(
            NeighbourLedger(first + i, role, f"/ledgers/x/{first + i}")
            for i, role in enumerate(roles)
        ),
    )


_UNKNOWN = (
    "foreign: namespace_unknown: /managed-ledgers/east-only/invoicing/persistent/invoices is "
    "absent and "
    "namespace east-only/invoicing has no policies here (/admin/policies/east-only/invoicing)"
)


def test_neighbour_kept_and_dead_lettered_as_namespace_unknown_is_no_problem() -> None:
    """Every neighbour ledger still there, each intent dead-lettered `foreign` with the
    verifier's namespace_unknown reason: no problem, and the line says so. Its dead letters
    are not the protocol's unlinks, so they are no L1 or S1 problem either."""
    neighbour = _neighbour()
    now = expected(MODEL)
    letters: dict[tuple[int, str], str] = {}
    reasons: dict[tuple[int, str], str] = {}
    for led in neighbour.ledgers:
        now.ledgers[led.ledger_id] = MODEL.ledgers[max(MODEL.ledgers)].metadata
        letters[(led.ledger_id, BOOKKEEPER)] = demo_outcome.FOREIGN
        reasons[(led.ledger_id, BOOKKEEPER)] = _UNKNOWN
    found = demo_outcome.problems(MODEL, [], now, letters, neighbour=neighbour, reasons=reasons)
    assert found == []
    assert demo_outcome.neighbour_line(neighbour, now, letters, reasons) == (
        "neighbour 'east' (undeclared, metadata in /neighbour): 5 of 5 ledgers kept; "
        "its intents: dead-lettered(foreign/namespace_unknown) 5"
    )


def test_neighbour_ledger_deleted_is_s1_and_other_outcomes_are_problems() -> None:
    """A neighbour ledger gone is S1; an intent acknowledged, or dead-lettered for another
    reason, means the verifier did not detect the neighbour."""
    neighbour = _neighbour()
    orphan, schema, closed, *_ = (led.ledger_id for led in neighbour.ledgers)
    now = expected(MODEL)
    letters = {(led.ledger_id, BOOKKEEPER): "foreign" for led in neighbour.ledgers}
    reasons = dict.fromkeys(letters, _UNKNOWN)
    for led in neighbour.ledgers:
        if led.ledger_id != orphan:
            now.ledgers[led.ledger_id] = MODEL.ledgers[max(MODEL.ledgers)].metadata
    del letters[(schema, BOOKKEEPER)]
    letters[(closed, BOOKKEEPER)] = "retries_exhausted"
    found = demo_outcome.problems(MODEL, [], now, letters, neighbour=neighbour, reasons=reasons)
    assert found == [
        f"S1: neighbour 'east' ledger {orphan} (orphan (trimmed, delete failed)) was deleted",
        f"neighbour 'east' ledger {schema}: its intent ended not dead-lettered, "
        "not dead-lettered(foreign/namespace_unknown)",
        f"neighbour 'east' ledger {closed}: its intent ended "
        "dead-lettered(retries_exhausted), not dead-lettered(foreign/namespace_unknown)",
    ]
    assert "4 of 5 ledgers kept" in demo_outcome.neighbour_line(neighbour, now, letters, reasons)
