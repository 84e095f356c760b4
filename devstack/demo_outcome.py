"""The demo's final check (S1, L1) and its per-artifact summary.

Every (ledger, tier) the protocol unlinked is classified by the artifact it is (the table
"What real Pulsar leaves behind": an OPEN cursor ledger, a pre-2.2 ledger, a 2.1 offload,
pre-2.10 objects, a ledger at a long path under a long LAYOUT ...), and ends in one of three
outcomes: deleted (gone from its tier), dead-lettered with the DLQ's reason code, or kept.

- L1: every unlinked (ledger, tier) is deleted or dead-lettered with a reason; kept is a
  leak, unless another owner (a shadow topic) still lists the ledger.
- S1: everything the protocol did not unlink is still there (planted orphans are the
  reconciler's, so the protocol must leave them too), and so is every ledger of the neighbour
  cluster sharing our BookKeeper (`devstack.neighbour`).
- The neighbour, undeclared to the services, is detected: each intent sent for its ledgers
  ends in the DLQ as `foreign` (`namespace_unknown`: its namespace has no policies here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from devstack.neighbour import PlantedNeighbour
from devstack.simulator.model import ClusterModel, OrphanKind
from devstack.simulator.readback import ReadBack
from devstack.simulator.trim import TrimmedLedger
from services.metadata.paths import LedgerLayout

BOOKKEEPER = "bookkeeper"
OFFLOAD = "offload"
FOREIGN = "foreign"
#: The verifier's FOREIGN codes (services/verifier/clusters.py); a FOREIGN verdict's reason
#: starts with its code, and the dead letter's reason is `foreign: <verdict reason>`.
FOREIGN_CODES = frozenset(
    {
        "namespace_unknown",
        "referenced_by_cluster",
        "owner_in_cluster",
        "replicated_undeclared",
        "other_cluster",
    }
)

#: Legacy artifacts by planted kind and tier.
_LEGACY = {
    (OrphanKind.PRE_2_2_LEDGER, BOOKKEEPER): "pre-2.2 ledger (no custom metadata)",
    (OrphanKind.OFFLOAD_2_1, BOOKKEEPER): "2.1 offload, BookKeeper copy (no custom metadata)",
    (OrphanKind.OFFLOAD_2_1, OFFLOAD): "2.1 offload, objects (no driverMetadata)",
    (OrphanKind.OBJECTS_PRE_2_10, BOOKKEEPER): "2.7-2.9 offload, BookKeeper copy",
    (OrphanKind.OBJECTS_PRE_2_10, OFFLOAD): "pre-2.10 objects (no owner metadata)",
}


@dataclass(frozen=True)
class Unlinked:
    """One (ledger, tier) the protocol unlinked, so must delete (or dead-letter)."""

    ledger_id: int
    tier: str
    artifact: str
    object_keys: tuple[str, ...] = ()
    still_referenced: bool = False
    """Another owner (a shadow topic) still lists it: it must be kept."""


def artifact(model: ClusterModel, ledger_id: int, tier: str, *, cursor: bool = False) -> str:
    """What kind of artifact the (ledger, tier) is, with the path a BookKeeper copy sits at
    when the LAYOUT is not the hybrid one."""
    kinds = {p.ledger_id: p.kind for p in model.planted if p.ledger_id is not None}
    offload = model.offload_of(ledger_id)
    if cursor:
        name = "cursor ledger left OPEN (asyncDeleteCursorLedger)"
    elif (kinds.get(ledger_id), tier) in _LEGACY:
        name = _LEGACY[(kinds[ledger_id], tier)]
    elif offload is not None:
        name = "offloaded objects (2.10+)" if tier == OFFLOAD else "offloaded, BookKeeper copy"
    else:
        name = "data ledger"
    ledger = model.ledgers.get(ledger_id)
    if tier == BOOKKEEPER and ledger is not None and model.spec.layout is not _HYBRID:
        written = ledger.path_layout
        name += f" @ {'hybrid (Pulsar >= 2.10)' if written is _HYBRID else written.value} path"
    return name


_HYBRID = LedgerLayout.HIERARCHICAL


def from_trim(model: ClusterModel, trimmed: Iterable[TrimmedLedger]) -> list[Unlinked]:
    """The tiers a trim through the marker unlinks: BookKeeper unless `bookkeeperDeleted`,
    the objects whenever the context carries a uuid (and the driver writes objects)."""
    out = []
    for t in trimmed:
        shared = t.still_referenced
        if t.delete_from_bookkeeper:
            name = artifact(model, t.ledger_id, BOOKKEEPER)
            out.append(Unlinked(t.ledger_id, BOOKKEEPER, _shadowed(name, shared), (), shared))
        if t.object_keys:
            name = artifact(model, t.ledger_id, OFFLOAD)
            out.append(
                Unlinked(t.ledger_id, OFFLOAD, _shadowed(name, shared), t.object_keys, shared)
            )
    return out


def _shadowed(name: str, shared: bool) -> str:
    return f"listed by a shadow topic: {name}" if shared else name


def cursor_ledger(model: ClusterModel, ledger_id: int) -> Unlinked:
    return Unlinked(ledger_id, BOOKKEEPER, artifact(model, ledger_id, BOOKKEEPER, cursor=True))


def outcome(item: Unlinked, now: ReadBack, dead_letters: Mapping[tuple[int, str], str]) -> str:
    """`deleted`, `dead-lettered(<reason code>)` or `kept`."""
    if item.tier == BOOKKEEPER:
        gone = item.ledger_id not in now.ledgers
    else:
        gone = not any(key in now.objects for key in item.object_keys)
    if gone:
        return "deleted"
    reason = dead_letters.get((item.ledger_id, item.tier))
    return f"dead-lettered({reason})" if reason is not None else "kept"


def problems(
    model: ClusterModel,
    unlinked: list[Unlinked],
    now: ReadBack,
    dead_letters: Mapping[tuple[int, str], str],
    *,
    neighbour: PlantedNeighbour | None = None,
    reasons: Mapping[tuple[int, str], str] | None = None,
) -> list[str]:
    """S1 and L1 violations (see the module docstring); empty when the run was correct.

    With `neighbour`: its ledgers must all still exist, and each must have ended in the DLQ
    as `foreign` (`namespace_unknown`; `reasons` holds the dead letters' reason texts)."""
    found = [] if neighbour is None else neighbour_problems(neighbour, now, dead_letters, reasons)
    for item in unlinked:
        result = outcome(item, now, dead_letters)
        if item.still_referenced and result == "deleted":
            found.append(f"S1: {item.tier} copy of {item.ledger_id}, still listed, was deleted")
        elif not item.still_referenced and result == "kept":
            found.append(f"L1: {item.tier} copy of unlinked ledger {item.ledger_id} remains")
    unlinked_ids = {i.ledger_id for i in unlinked if i.tier == BOOKKEEPER}
    unlinked_keys = {k for i in unlinked for k in i.object_keys}
    kept = {led.ledger_id for led in model.bookkeeper_ledgers()} - unlinked_ids
    found += [f"S1: ledger {i} was deleted" for i in sorted(kept - set(now.ledgers))]
    found += [
        f"S1: object {k} was deleted"
        for k in sorted(set(model.objects) - unlinked_keys - set(now.objects))
    ]
    return found


def artifact_lines(
    model: ClusterModel,
    unlinked: list[Unlinked],
    now: ReadBack,
    dead_letters: Mapping[tuple[int, str], str],
) -> list[str]:
    """One line per artifact kind: how many ended deleted, dead-lettered (by reason), kept;
    then the planted orphans the protocol never unlinked (left for the reconciler)."""
    table: dict[str, Counter[str]] = {}
    for item in unlinked:
        table.setdefault(item.artifact, Counter())[outcome(item, now, dead_letters)] += 1
    lines = [
        f"  {name}: " + ", ".join(f"{result} {n}" for result, n in sorted(counts.items()))
        for name, counts in sorted(table.items())
    ]
    unlinked_ids = {i.ledger_id for i in unlinked if i.tier == BOOKKEEPER}
    unlinked_keys = {k for i in unlinked for k in i.object_keys}
    left = Counter(
        p.kind.value
        for p in model.planted
        if p.kind.deletable
        and (
            not set(p.object_keys) & unlinked_keys
            if p.object_keys
            else p.ledger_id not in unlinked_ids
        )
    )
    if left:
        orphans = ", ".join(f"{kind} {n}" for kind, n in sorted(left.items()))
        lines.append(f"  planted orphans left for the reconciler: kept ({orphans})")
    return lines


def foreign_code(reason: str) -> str:
    """The verifier's FOREIGN code a dead letter's reason leads with, else `unknown`."""
    words = [part.strip() for part in reason.split(":", 2)[:2]]
    return next((word for word in words if word in FOREIGN_CODES), "unknown")


def neighbour_outcome(
    ledger_id: int,
    dead_letters: Mapping[tuple[int, str], str],
    reasons: Mapping[tuple[int, str], str] | None,
) -> str:
    """`dead-lettered(foreign/<code>)`, `dead-lettered(<reason code>)` or `not dead-lettered`."""
    code = dead_letters.get((ledger_id, BOOKKEEPER))
    if code is None:
        return "not dead-lettered"
    if code == FOREIGN:
        code += "/" + foreign_code((reasons or {}).get((ledger_id, BOOKKEEPER), ""))
    return f"dead-lettered({code})"


def neighbour_deleted(neighbour: PlantedNeighbour, now: ReadBack) -> list[str]:
    """S1: every ledger znode of the neighbour is still in the shared root."""
    return [
        f"S1: neighbour {neighbour.cluster!r} ledger {led.ledger_id} ({led.role.value}) was deleted"
        for led in neighbour.ledgers
        if led.ledger_id not in now.ledgers
    ]


def neighbour_problems(
    neighbour: PlantedNeighbour,
    now: ReadBack,
    dead_letters: Mapping[tuple[int, str], str],
    reasons: Mapping[tuple[int, str], str] | None = None,
) -> list[str]:
    """S1 for another cluster's ledgers, and the verifier's detection of an undeclared one."""
    found = neighbour_deleted(neighbour, now)
    expected = f"dead-lettered({FOREIGN}/namespace_unknown)"
    for led in neighbour.ledgers:
        got = neighbour_outcome(led.ledger_id, dead_letters, reasons)
        if got != expected:
            found.append(
                f"neighbour {neighbour.cluster!r} ledger {led.ledger_id}: its intent ended "
                f"{got}, not {expected}"
            )
    return found


def neighbour_line(
    neighbour: PlantedNeighbour,
    now: ReadBack,
    dead_letters: Mapping[tuple[int, str], str],
    reasons: Mapping[tuple[int, str], str] | None = None,
) -> str:
    """How many of the neighbour's ledgers are still there, and how its intents ended."""
    kept = sum(1 for led in neighbour.ledgers if led.ledger_id in now.ledgers)
    ended = Counter(neighbour_outcome(i, dead_letters, reasons) for i in neighbour.ledger_ids)
    outcomes = ", ".join(f"{result} {n}" for result, n in sorted(ended.items()))
    return (
        f"neighbour {neighbour.cluster!r} (undeclared, metadata in {neighbour.metadata_at}): "
        f"{kept} of {len(neighbour.ledgers)} ledgers kept; its intents: {outcomes}"
    )
