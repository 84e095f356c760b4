"""Broker-style unlinks against the real ZooKeeper and S3, as an unmodified Pulsar broker does
them: the metadata write first, then its own deletes, in-memory attempts only.

Sources (each test names the one it models): `ManagedLedgerImpl.internalTrimLedgers` and
`asyncDeleteLedgerWithRetry` (3 attempts, 60 s apart), `OffloadUtils.cleanupOffloaded`,
`ManagedCursorImpl.switchToNewLedger`, `ManagedLedgerImpl.asyncDeleteCursor` /
`ManagedCursorImpl.asyncDeleteCursorLedger`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from devstack.simulator.broker import (
    BOOKKEEPER,
    OFFLOAD,
    BrokerDeleter,
    DeleteFaults,
    plan_trim,
    trim_like_broker,
    unsubscribe,
)
from devstack.simulator.broker_run import choose, unlink_like_brokers
from devstack.simulator.generate import build_model
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import read_cluster
from devstack.simulator.s3 import S3ObjectStore
from devstack.simulator.writer import write_cluster
from devstack.simulator.znodes import ml_to_proto
from services.core.errors import InvalidArgument
from services.metadata import LedgerPaths, LedgerState, ManagedLedgers, ZkMetadataStore
from tests.devstack_sim.conftest import SMALL

MODEL = build_model(SMALL)


@dataclass
class Cluster:
    model: ClusterModel
    store: ZkMetadataStore
    objects: S3ObjectStore
    sleeps: list[float]

    def deleter(self, share: float) -> BrokerDeleter:
        async def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)

        return BrokerDeleter(
            self.store, self.objects, faults=DeleteFaults(share, seed=3), sleep=sleep
        )


@pytest.fixture
async def cluster(store: ZkMetadataStore, objects: S3ObjectStore) -> Cluster:
    model = await write_cluster(SMALL, store=store, s3_client=objects, concurrency=32)
    return Cluster(model, store, objects, [])


def _offloaded_ml(model: ClusterModel) -> str:
    """A trimmable ML (no shadow) whose oldest ledger is offloaded and still in BookKeeper."""
    plan = choose(model, every=1)
    return next(
        name
        for name in plan.topics
        if (o := model.managed_ledgers[name].ledgers[0].offload) and not o.bookkeeper_deleted
    )


def test_plan_removes_the_oldest_and_deletes_each_tier_it_has() -> None:
    """`internalTrimLedgers`: the removed ledger's BookKeeper copy (it is not
    `bookkeeperDeleted`) with 3 attempts, and its objects (the context has a uuid) once."""
    ml = MODEL.managed_ledgers[_offloaded_ml(MODEL)]
    plan = plan_trim(ml_to_proto(ml), 1, default_bucket=SMALL.bucket)
    tiers = [(d.ledger_id, d.tier, d.attempts, len(d.object_keys)) for d in plan.deletes]
    first = ml.ledger_ids[0]
    assert tiers == [(first, BOOKKEEPER, 3, 0), (first, OFFLOAD, 1, 2)]
    assert [e.ledgerId for e in plan.info.ledgerInfo] == list(ml.ledger_ids[1:])


def test_plan_refuses_the_current_ledger_and_incomplete_offloads() -> None:
    """Trimming every ledger, or flagging the current one, is not what a broker does."""
    ml = MODEL.managed_ledgers[_offloaded_ml(MODEL)]
    info = ml_to_proto(ml)
    with pytest.raises(InvalidArgument):
        plan_trim(info, len(ml.ledger_ids))
    with pytest.raises(InvalidArgument):
        plan_trim(info, 0, flag_bookkeeper_deleted=[ml.ledger_ids[-1]])


def test_delete_faults_are_seeded_and_bounded() -> None:
    """The same seed fails the same deletions; a share outside [0, 1] is refused."""
    first, second = DeleteFaults(0.3, seed=5), DeleteFaults(0.3, seed=5)
    assert [first.draw() for _ in range(50)] == [second.draw() for _ in range(50)]
    assert 0 < first.injected < 50
    with pytest.raises(InvalidArgument):
        DeleteFaults(1.5)


async def test_trim_writes_the_list_then_deletes_every_tier(cluster: Cluster) -> None:
    """`internalTrimLedgers` then `asyncDeleteLedger(long, LedgerInfo)`: the list loses the
    ledger, then its znode and both objects are gone."""
    name = _offloaded_ml(cluster.model)
    first = cluster.model.managed_ledgers[name].ledger_ids[0]
    result = await trim_like_broker(
        ManagedLedgers(cluster.store), cluster.deleter(0.0), name, 1, default_bucket=SMALL.bucket
    )
    back = await read_cluster(cluster.store, s3_client=cluster.objects, buckets=(SMALL.bucket,))
    assert [o.deleted for o in result.outcomes] == [True, True]
    assert (first in back.ledgers, first in back.managed_ledgers[name].ledger_ids) == (False, False)
    assert not set(result.outcomes[1].item.object_keys) & set(back.objects)


async def test_failed_deletes_leave_the_unlinked_ledger_behind(cluster: Cluster) -> None:
    """`asyncDeleteLedgerWithRetry` gives up after 3 attempts 60 s apart; the objects'
    delete is tried once (`cleanupOffloaded`). The list was written first: the ledger is
    unlisted and still in BookKeeper and S3, orphaned for good."""
    name = _offloaded_ml(cluster.model)
    first = cluster.model.managed_ledgers[name].ledger_ids[0]
    result = await trim_like_broker(
        ManagedLedgers(cluster.store), cluster.deleter(1.0), name, 1, default_bucket=SMALL.bucket
    )
    back = await read_cluster(cluster.store, s3_client=cluster.objects, buckets=(SMALL.bucket,))
    attempts = [(o.item.tier, o.attempts, o.deleted, o.injected) for o in result.outcomes]
    assert attempts == [(BOOKKEEPER, 3, False, True), (OFFLOAD, 1, False, True)]
    assert cluster.sleeps == [60.0, 60.0]
    assert (first in back.ledgers, first in back.managed_ledgers[name].ledger_ids) == (True, False)
    assert set(result.outcomes[1].item.object_keys) <= set(back.objects)


async def test_flagged_offload_keeps_its_entry_and_loses_its_bookkeeper_copy(
    cluster: Cluster,
) -> None:
    """`internalTrimLedgers` flags a complete offload `bookkeeperDeleted` in the same write,
    then deletes only its BookKeeper copy (`asyncDeleteLedgerFromBookKeeper`)."""
    mls = ManagedLedgers(cluster.store)
    name = _offloaded_ml(cluster.model)
    ml = cluster.model.managed_ledgers[name]
    target = next(
        i.ledger_id
        for i in ml.ledgers[:-1]
        if i.offload and i.offload.complete and not i.offload.bookkeeper_deleted
    )
    result = await trim_like_broker(
        mls, cluster.deleter(0.0), name, 0, flag_bookkeeper_deleted=[target]
    )
    listed = {e.ledgerId: e for e in (await mls.read(name)).value.ledgerInfo}
    assert [(o.item.ledger_id, o.item.tier, o.deleted) for o in result.outcomes] == [
        (target, BOOKKEEPER, True)
    ]
    assert listed[target].offloadContext.bookkeeperDeleted
    assert await cluster.store.exists(LedgerPaths().ledger_path(target)) is None


async def test_cursor_switch_and_unsubscribe(cluster: Cluster) -> None:
    """`switchToNewLedger`: the cursor znode names the new ledger, the old one is deleted
    once unclosed and, when that fails, stays OPEN. `asyncDeleteCursor`: the cursor znode
    goes first, then its ledger."""
    mls = ManagedLedgers(cluster.store)
    plan = choose(cluster.model, every=1)
    (switched, gone, *_) = plan.switches + plan.unsubscribes
    cursors = cluster.model.cursors
    result = await unlink_like_brokers(
        cluster.model,
        type(plan)((), (switched,), ()),
        store=cluster.store,
        objects=cluster.objects,
        faults=DeleteFaults(1.0),
    )
    (new_id,) = result.new_cursor_ledgers
    old = cursors[switched].cursors_ledger_id
    back = await read_cluster(cluster.store, s3_client=cluster.objects, buckets=(SMALL.bucket,))
    assert (await mls.read_cursor(*switched)).value.cursorsLedgerId == new_id
    assert back.ledgers[old].state is LedgerState.OPEN
    assert back.ledgers[new_id].state is LedgerState.OPEN
    outcome = await unsubscribe(mls, cluster.deleter(0.0), *gone)
    assert outcome is not None
    assert outcome.deleted
    assert gone[1] not in await mls.cursors(gone[0])
    gone_ledger = LedgerPaths().ledger_path(cursors[gone].cursors_ledger_id)
    assert await cluster.store.exists(gone_ledger) is None


async def test_a_share_of_broker_deletes_fail(cluster: Cluster) -> None:
    """Over a cluster, the failures injected are exactly the deletions left behind, and
    every other unlinked tier is gone."""
    plan = choose(cluster.model)
    result = await unlink_like_brokers(
        cluster.model,
        plan,
        store=cluster.store,
        objects=cluster.objects,
        faults=DeleteFaults(0.4, seed=2),
    )
    assert result.unlinked > 0
    assert 0 < result.failures_injected == len(result.left_behind) < result.unlinked
