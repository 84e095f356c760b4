"""`--broker-style` at the unit level, on the real ZooKeeper and S3 with no marker and no
follower: the simulated brokers trim as Pulsar's `ManagedLedgerImpl.internalTrimLedgers`
does (list write first, `bookkeeperDeleted` flagged in the same write, then their own deletes
with in-memory attempts only), the run counts what they unlinked and what leaked, and exits 0
only once nothing leaked. Without a follower, the failed deletes stay leaked; deleting them
(what the follower's intents lead the deleter to do) closes the leak."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from benchmarks.load.checks import CheckResult, exit_code, final_check
from benchmarks.load.report import broker_style_line, figures, summary
from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import TopicState, Workload, WorkloadOptions
from devstack.s3 import S3Server
from devstack.simulator.s3 import open_object_store
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ANY_VERSION, ZkMetadataStore
from tests.load.conftest import BUCKET, Prepared
from tombstone.v1 import pending_delete_pb2 as _pd


def _options(share: float) -> WorkloadOptions:
    """Every new ledger offloaded and still in BookKeeper, so each trim also flags one."""
    return WorkloadOptions(
        brokers=1, topics=1, rate=1.0, duration=0.0, offloaded_share=1.0,
        bookkeeper_deleted_share=0.0, broker_style=True, delete_failure_share=share,
        delete_backoff=0.0,
    )  # fmt: skip


@pytest.fixture(params=[0.0, 1.0], ids=["deletes-succeed", "deletes-fail"])
async def brokers(
    request: pytest.FixtureRequest, zk: ZooKeeperServer, s3: S3Server
) -> AsyncIterator[Prepared]:
    """One broker-style topic, rolled over and trimmed twice; its deletes finished."""
    async with (
        ZkMetadataStore.connect(zk.address) as store,
        open_object_store(s3.client_config()) as objects,
    ):
        tracker = Tracker(store, objects, BUCKET, min_age=0.0)
        workload = Workload(
            _options(request.param), store=store, objects=objects, marker=None,
            bucket=BUCKET, cluster="standalone", on_marked=tracker.add,
        )  # fmt: skip
        await workload.prepare()
        (topic,) = workload.topics
        for _ in range(2):
            await workload._roll_over(topic)
            await workload._trim(topic)
        assert workload.brokers is not None
        await workload.brokers.wait()
        await tracker.poll_once()
        yield Prepared(workload, tracker, store, objects)


def _unlinked(prepared: Prepared) -> list[tuple[int, int]]:
    return [(m.ledger_id, m.tier) for m in prepared.tracker.marked]


async def test_trims_write_the_list_and_flag_offloads(brokers: Prepared) -> None:
    """After two trims keeping 2: the first ledger and the first offloaded pair left the
    list (BookKeeper tier unless flagged earlier, objects always); each trim flagged the
    older kept offload `bookkeeperDeleted` and unlinked its BookKeeper copy."""
    (topic,) = brokers.workload.topics
    created = brokers.workload._next_id - 5
    first, a, b, c, _ = range(created, created + 5)
    listed = (await brokers.workload.mls.read(topic.ml_name)).value.ledgerInfo
    assert [e.ledgerId for e in listed] == [c, created + 4]
    assert [e.offloadContext.bookkeeperDeleted for e in listed] == [True, False]
    ledger, offload = _pd.LEDGER, _pd.OFFLOAD_LEDGER
    assert sorted(_unlinked(brokers)) == sorted(
        [(first, ledger), (a, ledger), (a, offload), (b, ledger), (b, offload), (c, ledger)]
    )


async def test_leaks_are_counted_and_fail_the_run(brokers: Prepared) -> None:
    """With every delete failing and no follower, every unlinked pair leaks and the run
    fails; with none failing nothing leaks. S1 holds either way."""
    assert brokers.workload.brokers is not None
    injected = brokers.workload.brokers.failures_injected
    check = await final_check(brokers.workload, brokers.tracker)
    n = len(brokers.tracker.marked)
    drained = not brokers.tracker.pending
    assert check.s1_violations == []
    assert (len(check.leaked), injected, drained) in ((0, 0, True), (n, n, False))
    assert exit_code(check, drained) == (0 if injected == 0 else 1)
    assert broker_style_line(n, injected, check) == (
        f"broker-style: {n} unlinked by brokers, {injected} delete failures injected, "
        f"{len(check.leaked)} leaked"
    )


async def test_deleting_what_leaked_passes_the_run(brokers: Prepared) -> None:
    """What the follower's intents make the deleter do — delete every leaked tier — leaves
    0 leaked, S1 intact, the backlog drained and exit code 0; the summary says so."""
    for marked in brokers.tracker.marked:
        if marked.tier == _pd.LEDGER:
            path = brokers.tracker.paths.ledger_path(marked.ledger_id)
            if await brokers.store.exists(path) is not None:
                await brokers.store.delete(path, version=ANY_VERSION)
        for key in marked.object_keys:
            await brokers.objects.delete_object(bucket=BUCKET, key=key)
    await brokers.tracker.poll_once()
    check = await final_check(brokers.workload, brokers.tracker)
    drained = not brokers.tracker.pending
    assert (check.passed, len(check.leaked), drained, exit_code(check, drained)) == (
        True,
        0,
        True,
        0,
    )
    fig = figures(brokers.tracker, brokers.workload.stats, 1.0, drained, 0)
    n = len(brokers.tracker.marked)
    text = summary(
        brokers.workload.options, brokers.workload.stats, fig, check, broker_style=(n, 0)
    )
    assert f"broker-style: {n} unlinked by brokers, 0 delete failures injected, 0 leaked" in text


async def test_an_unseen_flag_is_tracked_on_reload(brokers: Prepared) -> None:
    """A broker-style write that landed while its answer was lost may have flagged a kept
    ledger `bookkeeperDeleted`: re-reading the list tracks that BookKeeper copy."""
    topic: TopicState = brokers.workload.topics[0]
    await brokers.workload._roll_over(topic)
    target = topic.info.ledgerInfo[-2].ledgerId
    flagged = type(topic.info)()
    flagged.CopyFrom(topic.info)
    flagged.ledgerInfo[-2].offloadContext.bookkeeperDeleted = True
    await brokers.workload.mls.write(topic.ml_name, flagged, version=topic.version)
    await brokers.workload._reload(topic)
    assert (target, _pd.LEDGER) in brokers.tracker.pending


def test_exit_code_needs_s1_no_leak_and_a_drained_backlog() -> None:
    """0 only when S1 holds, nothing leaked and the backlog drained."""
    clean = CheckResult()
    leak = CheckResult(l1_remaining=["unlinked ledger 7 remains"], leaked={(7, _pd.LEDGER)})
    s1 = CheckResult(s1_violations=["listed ledger 8 missing"])
    codes = [exit_code(clean, True), exit_code(clean, False), exit_code(leak, True)]
    assert [*codes, exit_code(s1, True)] == [0, 1, 1, 1]
