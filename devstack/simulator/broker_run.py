"""Broker-style unlinks over a simulated cluster: some topics trimmed, some cursors switched
to a new ledger and some unsubscribed, each the way an unmodified broker does it
(`devstack.simulator.broker`), with injected delete failures. Used by `devstack simulate
--broker-style` and by the demo beside its trims through the marker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from devstack.simulator._factory import Factory, IdAllocator, LedgerShape, pulsar_metadata
from devstack.simulator.broker import (
    BrokerDeleter,
    DeleteFaults,
    DeleteOutcome,
    switch_cursor_ledger,
    trim_like_broker,
    unsubscribe,
)
from devstack.simulator.model import ClusterModel
from devstack.simulator.s3 import ObjectStore
from devstack.simulator.spec import IdLayout
from services.metadata import (
    ANY_VERSION,
    BookKeeperLedgers,
    CompressionType,
    LedgerLayout,
    LedgerPaths,
    LedgerState,
    ManagedLedgers,
    MetadataStore,
)

TRIM = "trim"
SWITCH = "cursor switch"
UNSUBSCRIBE = "unsubscribe"


@dataclass(frozen=True)
class BrokerStylePlan:
    """Which owners the brokers unlink themselves (the rest is left to other callers)."""

    topics: tuple[str, ...]
    """ML names trimmed to their current ledger."""
    switches: tuple[tuple[str, str], ...]
    """(ML name, cursor) moved to a new cursor ledger."""
    unsubscribes: tuple[tuple[str, str], ...]
    """(ML name, cursor) deleted."""

    def owns(self, ml_name: str) -> bool:
        return ml_name in self.topics


def choose(model: ClusterModel, *, every: int = 2) -> BrokerStylePlan:
    """Every `every`-th trimmable ML in name order, and the cursors with a ledger of those
    MLs, alternately switched and unsubscribed.

    Trimmable: two ledgers or more, not a shadow topic, and sharing no ledger with another
    ML (a shadow's source: the broker does not know about the shadow's references, and the
    simulated check would count its delete as an S1 violation of the model).
    """
    if every < 1:
        raise ValueError("every must be at least 1")
    counts: dict[int, int] = {}
    for ml in model.managed_ledgers.values():
        for ledger_id in ml.ledger_ids:
            counts[ledger_id] = counts.get(ledger_id, 0) + 1
    eligible = [
        ml.name
        for ml in sorted(model.managed_ledgers.values(), key=lambda m: m.name)
        if len(ml.ledger_ids) >= 2
        and not ml.shadow_source
        and all(counts[i] == 1 for i in ml.ledger_ids)
    ]
    topics = tuple(eligible[::every])
    cursors = sorted(
        key
        for key, cursor in model.cursors.items()
        if key[0] in topics and cursor.cursors_ledger_id >= 0
    )
    return BrokerStylePlan(topics, tuple(cursors[0::2]), tuple(cursors[1::2]))


@dataclass
class BrokerStyleResult:
    """Every deletion the brokers attempted, by the operation that unlinked it."""

    outcomes: list[tuple[str, DeleteOutcome]] = field(default_factory=list)
    new_cursor_ledgers: list[int] = field(default_factory=list)

    @property
    def unlinked(self) -> int:
        """(ledger, tier) pairs the brokers unlinked."""
        return len(self.outcomes)

    @property
    def failures_injected(self) -> int:
        return sum(1 for _, o in self.outcomes if o.injected)

    @property
    def left_behind(self) -> list[DeleteOutcome]:
        """Unlinked, and the broker gave up deleting it: the leak the follower closes."""
        return [o for _, o in self.outcomes if not o.deleted]


async def unlink_like_brokers(
    model: ClusterModel,
    plan: BrokerStylePlan,
    *,
    store: MetadataStore,
    objects: ObjectStore | None,
    faults: DeleteFaults,
    backoff_seconds: float = 0.0,
) -> BrokerStyleResult:
    """Run `plan` against the cluster `model` was written into."""
    spec = model.spec
    mls = ManagedLedgers(
        store,
        compression=CompressionType[spec.compression.value],
        compression_threshold_bytes=spec.compression_threshold,
    )

    def paths_of(ledger_id: int) -> LedgerPaths:
        ledger = model.ledgers.get(ledger_id)
        layout = ledger.path_layout if ledger is not None else LedgerLayout.HIERARCHICAL
        return LedgerPaths(root=spec.ledgers_root, layout=layout)

    deleter = BrokerDeleter(
        store, objects, faults=faults, backoff_seconds=backoff_seconds, paths_of=paths_of
    )
    result = BrokerStyleResult()
    for name in plan.topics:
        n = len(model.managed_ledgers[name].ledger_ids) - 1
        trimmed = await trim_like_broker(mls, deleter, name, n, default_bucket=spec.bucket)
        result.outcomes += [(TRIM, o) for o in trimmed.outcomes]
    await _switch_all(model, plan.switches, store, mls, deleter, result)
    for ml_name, cursor in plan.unsubscribes:
        outcome = await unsubscribe(mls, deleter, ml_name, cursor)
        if outcome is not None:
            result.outcomes.append((UNSUBSCRIBE, outcome))
    return result


async def _switch_all(
    model: ClusterModel,
    cursors: Iterable[tuple[str, str]],
    store: MetadataStore,
    mls: ManagedLedgers,
    deleter: BrokerDeleter,
    result: BrokerStyleResult,
) -> None:
    """Each cursor gets a new OPEN ledger (Pulsar >= 2.10 writes it at its hybrid path)."""
    root = model.spec.ledgers_root
    bk = BookKeeperLedgers(store, paths=LedgerPaths(root=root))
    factory = Factory(model.spec, IdAllocator(IdLayout.SHORT))
    for ml_name, cursor in cursors:
        new_id = await allocate_ledger_id(store, root)
        custom = pulsar_metadata(ml_name=ml_name, cursor=cursor)
        metadata = factory.ledger_metadata(new_id, LedgerShape(LedgerState.OPEN), custom)
        outcome = await switch_cursor_ledger(mls, bk, deleter, ml_name, cursor, metadata)
        result.new_cursor_ledgers.append(new_id)
        if outcome is not None:
            result.outcomes.append((SWITCH, outcome))


async def allocate_ledger_id(store: MetadataStore, root: str) -> int:
    """A new ledger id from BookKeeper's generator (`ZkLedgerIdGenerator`: create a
    sequential `idgen/ID-` child, take its number, delete it)."""
    path, _ = await store.create_sequential(f"{root}/idgen/ID-")
    await store.delete(path, version=ANY_VERSION)
    return int(path.rsplit("ID-", 1)[1])


def render_broker_style(result: BrokerStyleResult) -> str:
    """What the brokers unlinked and what their own deletes left behind."""
    by_operation: dict[str, int] = {}
    for operation, _ in result.outcomes:
        by_operation[operation] = by_operation.get(operation, 0) + 1
    parts = ", ".join(f"{op} {n}" for op, n in sorted(by_operation.items())) or "none"
    return (
        f"Broker-style unlinks: {result.unlinked} (ledger, tier) unlinked by brokers ({parts}), "
        f"{result.failures_injected} delete failures injected, {len(result.left_behind)} left "
        "behind for the follower"
    )
