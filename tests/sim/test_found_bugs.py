"""Regression tests for the bugs the simulation found in the services (docs/simulation.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.ports import DeleteFailed, DeleteResult
from sim.loop import VirtualLoop
from sim.pulsar import PATHS
from sim.run import run_seed
from sim.scheduler import Fault, Scheduler
from sim.zk import Session, ZooKeeper


def test_seed_6513_leaves_no_orphan() -> None:
    """The same PDLI delivered twice to one deleter (a broker disconnect redelivers what it
    holds) put one ledger path twice into one ZooKeeper multi; the second delete's `NoNode`,
    judged against the first one inside the failed multi, was taken as "already deleted", the
    message acknowledged, and the ledger, whose own delete then failed, was orphaned (L1)."""
    assert run_seed(6513).violations == []


def test_seeds_356_1288_and_3698_keep_the_latest_schema_version_linked() -> None:
    """A schema deleted through the marker (every version asked), one version's PDLI not
    accepted: the marker unlinked the others, the latest among them, leaving a locator whose
    `info` named a ledger its `index` did not. The latest's PDLI was found still referenced
    and acknowledged; the broker's next `putSchema` then dropped that ledger with no intent
    left (L1). The latest version now stays linked unless every version goes."""
    for seed in (356, 1288, 3698):
        assert run_seed(seed).violations == []


def test_one_path_twice_in_a_batch_is_never_reported_absent_while_present() -> None:
    """Two deletes of one ledger coalesced into one batch; the first request reaches
    ZooKeeper, the next one loses its connection. Whoever is told "deleted" (or "already
    absent") must find the znode gone."""

    async def main() -> tuple[list[DeleteResult | BaseException], bool]:
        sched = Scheduler(0)
        outcomes: Iterator[Fault] = iter([Fault.NONE, Fault.ERROR, Fault.ERROR])
        sched.draw = lambda: next(outcomes, Fault.NONE)  # type: ignore[method-assign]
        server = ZooKeeper(sched)
        path = PATHS.ledger_path(8)
        server.create(path, b"ledger", make_parents=True)
        deleter = ZooKeeperLedgerDeleter(
            Session(server, "deleter"),
            limits=BackendLimits(concurrency=4, per_second=1000),
            parent_sweep_delay=3600,
        )
        results = await asyncio.gather(
            deleter.delete_ledger(ledger_id=8, path=path, version=0),
            deleter.delete_ledger(ledger_id=8, path=path, version=0),
            return_exceptions=True,
        )
        return list(results), server.stat(path) is None

    loop = VirtualLoop()
    try:
        results, gone = loop.run_until_complete(main())
    finally:
        loop.close()
    succeeded = [r for r in results if isinstance(r, DeleteResult)]
    assert all(isinstance(r, DeleteResult | DeleteFailed) for r in results)
    assert not succeeded or gone


def test_seeds_75_and_198_a_deleted_shadow_topic_unlinks_nothing() -> None:
    """Deleting a shadow topic (its ML znode a copy of the source's list) made the follower
    publish signed PDLIs, fence token 0, naming the shadow for every ledger of the list; for a
    ledger created before Pulsar 2.2 (no custom metadata) that signed PDLI with its owner
    gone was the proof of ownership, and the ledger the source still listed was deleted (S1).
    Seeds 75 and 198 found it; `tests/follower/test_diff.py` pins the follower's rule."""
    assert run_seed(75).violations == []
    assert run_seed(198).violations == []


def test_seed_0_a_lost_read_does_not_end_the_shadow_index() -> None:
    """A connection loss during the verifier's shadow scan reached its loop as an
    ExceptionGroup (the reads run in a task group), past its `except TombstoneError`: the loop
    ended, which stops the real service. Seed 0 found it once the sim ran the index;
    `tests/verifier/test_shadow_names.py` pins it."""
    assert run_seed(0).violations == []


def test_seed_2_a_belief_never_deletes_a_ledger_created_again_under_its_id() -> None:
    """The marker's belief about (ledger 16, t2) outlived the ledger: the id was used again
    by another topic right after the DELETE verdict, the deleter's conditional delete failed,
    and the retried PDLI, believed, skipped the metadata match that names the new owner: the
    new ledger was deleted (S1). Seeds 2, 5, 6, 9 and 10 of the first 20 found it;
    `tests/verifier/test_believed.py` pins the rule."""
    for seed in (2, 5, 6, 9, 10):
        assert run_seed(seed).violations == []


def test_seeds_0_3_9_22_and_554_never_delete_the_neighbours_ledgers() -> None:
    """A second cluster shares our ledgers root with a geo-replicated namespace: its ledgers
    name our topics exactly. Declared (seeds 0, 3, 9), a reconciler intent for a ledger it
    had leaked under our topic's name was DELETE (S2: no neighbour referenced it any more);
    undeclared (seed 22), an unsigned PDLI claiming OBSERVED deleted a ledger it still
    referenced (S1); undeclared, with our owner absent (seed 554: a schema id only the
    neighbour used), the same. `tests/verifier/test_shared_clusters.py` pins the rule."""
    for seed in (0, 3, 9, 22, 554):
        assert run_seed(seed).violations == []
