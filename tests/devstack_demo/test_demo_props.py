"""The demo's cursor-property ledgers (`devstack/demo_props.py`): which of them the check
expects deleted, kept, or left to the reconciler. (Planting and moving them against the real
ZooKeeper runs in `tests/devstack_sim/test_cli.py::test_demo_runs_end_to_end`.)"""

from __future__ import annotations

from devstack.demo_outcome import problems
from devstack.demo_props import PlantedProps
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import ReadBack
from devstack.simulator.spec import ClusterSpec
from services.metadata import LedgerMetadata


def _planted(*, moved: bool = True) -> PlantedProps:
    planted = PlantedProps(
        ml_name="public/default/persistent/props-demo",
        topic="persistent://public/default/props-demo",
        current=10,
        leftover=11,
        compacted_old=12,
        buckets=(13, 14, 15),
    )
    if moved:
        planted.compacted_new, planted.merged_bucket, planted.moved = 16, 17, True
    return planted


def _present(*ids: int) -> ReadBack:
    return ReadBack(
        ledgers={
            i: LedgerMetadata(ledger_id=i, ensemble_size=1, write_quorum=1, ack_quorum=1)
            for i in ids
        }
    )


def test_before_the_move_every_planted_ledger_but_the_leftover_is_live() -> None:
    planted = _planted(moved=False)
    assert planted.leaks == []
    assert sorted(item.ledger_id for item in planted.live) == [12, 13, 14, 15]


def test_the_two_failed_deletes_are_leaks_and_the_rest_is_live() -> None:
    planted = _planted()
    assert [item.ledger_id for item in planted.leaks] == [12, 14]
    assert sorted(item.ledger_id for item in planted.live) == [15, 16, 17]
    assert all(item.still_referenced for item in planted.live)


def test_the_check_names_a_leak_left_and_a_live_ledger_deleted() -> None:
    planted = _planted()
    model = ClusterModel(spec=ClusterSpec(), instance_id="test", bookies=("bookie-1:3181",))
    now = _present(11, 14, 15, 16)  # 12 deleted (right), 14 left (L1), 17 deleted (S1)
    found = problems(model, planted.leaks + planted.live, now, {})
    assert found == [
        "L1: bookkeeper copy of unlinked ledger 14 remains",
        "S1: bookkeeper copy of 17, still listed, was deleted",
    ]


def test_the_leftover_waits_for_the_reconciler_then_must_be_proposed_and_deleted() -> None:
    planted = _planted()
    assert planted.before_reconciler_problems(_present(11)) == []
    assert planted.before_reconciler_problems(_present()) == [
        "S1: compaction leftover 11 deleted before the reconciler ran"
    ]
    live = (15, 16, 17)
    assert planted.after_reconciler_problems(_present(*live), {11}) == []
    assert planted.after_reconciler_problems(_present(*live), set()) == [
        "compaction leftover 11 not proposed by the reconciler"
    ]
    assert planted.after_reconciler_problems(_present(11, *live), {11}) == [
        "compaction leftover 11 still there after the submit"
    ]
    assert planted.after_reconciler_problems(_present(11, 15, 17), {11, 16}) == [
        "compaction leftover 11 still there after the submit",
        "S1: still referenced: compacted ledger of the __compaction cursor 16 was deleted",
        "the reconciler proposed 16, still referenced",
    ]
