"""The demo's broker-style part on the legacy profile's model: which owners the brokers
unlink, how their unlinks are named and counted, and the S1/L1 check over them. The unlinks
follow `ManagedLedgerImpl.internalTrimLedgers`, `ManagedCursorImpl.switchToNewLedger` and
`ManagedCursorImpl.asyncDeleteCursorLedger` (see `devstack.simulator.broker`)."""

from __future__ import annotations

from devstack import demo_brokers, demo_outcome
from devstack.demo_outcome import BOOKKEEPER, OFFLOAD
from devstack.demo_pipeline import Summary
from devstack.simulator import legacy_spec
from devstack.simulator.broker import BrokerDelete, DeleteOutcome
from devstack.simulator.broker_run import (
    SWITCH,
    TRIM,
    UNSUBSCRIBE,
    BrokerStyleResult,
    choose,
)
from devstack.simulator.generate import build_model
from devstack.simulator.readback import ReadBack, expected

MODEL = build_model(legacy_spec(seed=7, tenants=1, namespaces_per_tenant=2))
PLAN = choose(MODEL)


def _result(*, failed: frozenset[int] = frozenset()) -> BrokerStyleResult:
    """One trim of the first planned topic, one switch and one unsubscribe, as run."""
    ml = MODEL.managed_ledgers[PLAN.topics[0]]
    result = BrokerStyleResult(new_cursor_ledgers=[10_000])
    for ledger_id in ml.ledger_ids[:-1]:
        item = BrokerDelete(ledger_id, BOOKKEEPER, attempts=3)
        result.outcomes.append((TRIM, _done(item, failed)))
    for operation, key in ((SWITCH, PLAN.switches[0]), (UNSUBSCRIBE, PLAN.unsubscribes[0])):
        item = BrokerDelete(MODEL.cursors[key].cursors_ledger_id, BOOKKEEPER)
        result.outcomes.append((operation, _done(item, failed)))
    return result


def _done(item: BrokerDelete, failed: frozenset[int]) -> DeleteOutcome:
    fails = item.ledger_id in failed
    return DeleteOutcome(item, not fails, item.attempts, fails)


def _now(result: BrokerStyleResult, *, keep: set[int]) -> ReadBack:
    """The cluster after the brokers' and the deleter's deletes, except `keep`."""
    now = expected(MODEL)
    for _, outcome in result.outcomes:
        if outcome.item.ledger_id not in keep:
            now.ledgers.pop(outcome.item.ledger_id, None)
    now.ledgers[10_000] = next(iter(now.ledgers.values()))
    return now


def test_brokers_take_half_the_trimmable_topics_and_only_their_cursors() -> None:
    """Every other trimmable ML (no shadow, no shared ledger); cursors with a ledger of
    those MLs only, alternately switched and unsubscribed."""
    shadows = {ml.name for ml in MODEL.managed_ledgers.values() if ml.shadow_source}
    cursors = PLAN.switches + PLAN.unsubscribes
    assert PLAN.topics
    assert not set(PLAN.topics) & shadows
    assert {ml for ml, _ in cursors} <= set(PLAN.topics)
    assert all(MODEL.cursors[key].cursors_ledger_id >= 0 for key in cursors)
    assert 0 <= len(PLAN.switches) - len(PLAN.unsubscribes) <= 1


def test_unlinks_are_named_by_operation() -> None:
    """Trimmed ledgers keep their artifact name; cursor ledgers say which call left them
    OPEN; every name says broker-style."""
    items = demo_brokers.unlinked_items(MODEL, _result())
    names = [item.artifact for item in items]
    assert all(name.startswith("broker-style ") for name in names)
    assert "(switchToNewLedger)" in names[-2]
    assert "(asyncDeleteCursorLedger)" in names[-1]
    assert {item.tier for item in items} <= {BOOKKEEPER, OFFLOAD}


def test_leaked_counts_only_what_stays_without_a_dead_letter() -> None:
    """A failed broker delete later deleted (the follower's intent) or dead-lettered is not
    leaked; one still there without a dead letter is, and breaks L1."""
    unsubscribed = MODEL.cursors[PLAN.unsubscribes[0]].cursors_ledger_id
    switched = MODEL.cursors[PLAN.switches[0]].cursors_ledger_id
    result = _result(failed=frozenset({unsubscribed, switched}))
    items = demo_brokers.unlinked_items(MODEL, result)
    now = _now(result, keep={unsubscribed, switched})
    letters = {(switched, BOOKKEEPER): "forged"}
    line = demo_brokers.summary_line(result, items, now, letters)
    assert line == (
        f"broker-style: {len(items)} unlinked by brokers, 2 delete failures injected, 1 leaked"
    )
    assert demo_outcome.problems(MODEL, items, now, letters) == [
        f"L1: bookkeeper copy of unlinked ledger {unsubscribed} remains"
    ]


def test_a_deleted_new_cursor_ledger_breaks_s1() -> None:
    """The ledger a switch created is referenced by its cursor: it must remain."""
    result = _result()
    now = _now(result, keep=set())
    assert demo_brokers.new_ledger_problems(result, now) == []
    del now.ledgers[10_000]
    assert demo_brokers.new_ledger_problems(result, now) == [
        "S1: new cursor ledger 10000 was deleted"
    ]


async def test_waiting_for_the_follower_ends_when_settled_or_timed_out() -> None:
    """Settled once every unlinked tier is deleted or dead-lettered; a leak waits for the
    timeout and reports it."""
    first = MODEL.managed_ledgers[PLAN.topics[0]].ledger_ids[0]
    result = _result(failed=frozenset({first}))
    items = demo_brokers.unlinked_items(MODEL, result)
    leaking = _now(result, keep={first})
    settled = _now(result, keep=set())

    async def read_leaking() -> tuple[ReadBack, dict[tuple[int, str], str]]:
        return leaking, {}

    async def read_settled() -> tuple[ReadBack, dict[tuple[int, str], str]]:
        return settled, {}

    assert await demo_brokers.wait_settled(items, read_settled, timeout=0) is True
    assert await demo_brokers.wait_settled(items, read_leaking, timeout=0, poll=0) is False


def test_summary_adds_one_line_for_the_brokers() -> None:
    """The broker-style line comes right before the time; the other lines are unchanged."""
    line = "broker-style: 9 unlinked by brokers, 3 delete failures injected, 0 leaked"
    lines = Summary(seconds=1.0, broker_style=line).render().splitlines()
    assert lines[-3:-1] == [line, "time: 1.0s"]
    assert len(lines) == len(Summary(seconds=1.0).render().splitlines()) + 1
