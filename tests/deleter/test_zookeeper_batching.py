"""The ZooKeeper backend coalesces concurrent ledger deletes into multis, on the real server
behind a proxy that counts requests on the wire (and can refuse multi)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from devstack.zk_faults import DELETE, MULTI, ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.core.adaptive import Permit
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.ports import DeleteFailed, DeleteResult
from services.metadata import BookKeeperLedgers, LedgerMetadata, LedgerPaths, Segment
from services.metadata.zookeeper.store import ZkMetadataStore


class CountingLimits(BackendLimits):
    """The real limits, counting the rate units and the places under the concurrency limit
    the backend takes (for single requests and for batches alike)."""

    def __init__(self) -> None:
        super().__init__(concurrency=8, per_second=10_000)
        self.paced = 0
        self.slots = 0
        acquire = self.limiter.acquire

        async def counted() -> Permit:
            self.slots += 1
            return await acquire()

        self.limiter.acquire = counted  # type: ignore[method-assign]

    async def pace(self, weight: float = 1.0) -> None:
        self.paced += 1
        await super().pace(weight)


def ledger(ledger_id: int) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        segments=(Segment(0, ("b1:3181",)),),
        custom_metadata={"application": b"pulsar", "component": b"managed-ledger"},
    )


def outcome(result: DeleteResult | BaseException) -> str:
    """ "removed", "absent", or a failure (whether permanent, for DeleteFailed)."""
    if isinstance(result, DeleteResult):
        return "removed" if result.removed else "absent"
    if isinstance(result, DeleteFailed):
        return f"DeleteFailed(permanent={result.permanent})"
    return repr(result)


@pytest.fixture
async def proxy(zk: ZooKeeperServer) -> AsyncIterator[ZooKeeperFaultProxy]:
    async with ZooKeeperFaultProxy(zk.host, zk.port) as running:
        yield running


@pytest.fixture
async def store(proxy: ZooKeeperFaultProxy) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(proxy.address, session_timeout=5, request_timeout=5) as s:
        yield s


@pytest.fixture
def ledgers(store: ZkMetadataStore) -> BookKeeperLedgers:
    return BookKeeperLedgers(store)


@pytest.fixture
def limits() -> CountingLimits:
    return CountingLimits()


@pytest.fixture
async def deleter(
    store: ZkMetadataStore, limits: CountingLimits
) -> AsyncIterator[ZooKeeperLedgerDeleter]:
    """Batches of at most 8; the parent sweep waits until close (no deletes of its own)."""
    backend = ZooKeeperLedgerDeleter(
        store, paths=LedgerPaths(), limits=limits, parent_sweep_delay=60, batch_max=8
    )
    yield backend
    await backend.aclose()


async def delete_all(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, versions: dict[int, int]
) -> list[str]:
    """Concurrent delete_ledger calls, one per (ledger id, verified version)."""
    calls = [
        deleter.delete_ledger(ledger_id=i, path=ledgers.path(i), version=v)
        for i, v in versions.items()
    ]
    return [outcome(r) for r in await asyncio.gather(*calls, return_exceptions=True)]


async def test_concurrent_deletes_share_multis(
    deleter: ZooKeeperLedgerDeleter,
    ledgers: BookKeeperLedgers,
    proxy: ZooKeeperFaultProxy,
    store: ZkMetadataStore,
) -> None:
    """20 concurrent deletes with batches of 8 travel in 3 multis (8, 8, 4) and no single
    delete; every znode is gone."""
    ids = range(1, 21)
    for i in ids:
        await ledgers.create(ledger(i))
    got = await delete_all(deleter, ledgers, dict.fromkeys(ids, 0))
    gone = [await store.exists(ledgers.path(i)) for i in ids]
    assert (got, proxy.requests[MULTI], proxy.requests[DELETE], gone) == (
        ["removed"] * 20,
        3,
        0,
        [None] * 20,
    )


async def test_each_caller_gets_its_own_outcome(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """In one batch, a ledger whose metadata changed fails alone (transient, kept) and an
    absent one is "already gone"; the others are deleted."""
    for i in (1, 2, 3, 5):
        await ledgers.create(ledger(i))
    await ledgers.write(ledger(2), version=0)  # now at version 1
    got = await delete_all(deleter, ledgers, {1: 0, 2: 0, 3: 0, 4: 0, 5: 0})
    kept = [i for i in (1, 2, 3, 5) if await store.exists(ledgers.path(i)) is not None]
    assert (got, kept) == (
        ["removed", "DeleteFailed(permanent=False)", "removed", "absent", "removed"],
        [2],
    )


async def test_each_delete_counts_once_against_the_rate(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, limits: CountingLimits
) -> None:
    """Six deletes in one multi take six units of the rate and one concurrency slot."""
    for i in range(1, 7):
        await ledgers.create(ledger(i))
    got = await delete_all(deleter, ledgers, dict.fromkeys(range(1, 7), 0))
    assert (got, limits.paced, limits.slots) == (["removed"] * 6, 6, 1)


async def test_refused_multi_falls_back_to_single_deletes(
    deleter: ZooKeeperLedgerDeleter,
    ledgers: BookKeeperLedgers,
    proxy: ZooKeeperFaultProxy,
    store: ZkMetadataStore,
) -> None:
    """A server without multi: the refused batch is deleted one znode per request, and so
    is every later delete (multi is not tried again)."""
    for i in range(1, 5):
        await ledgers.create(ledger(i))
    proxy.refused.add(MULTI)
    first = await delete_all(deleter, ledgers, {1: 0, 2: 0, 3: 0})
    later = await delete_all(deleter, ledgers, {4: 0})
    gone = [await store.exists(ledgers.path(i)) for i in range(1, 5)]
    assert (first + later, proxy.requests[MULTI], proxy.requests[DELETE], gone) == (
        ["removed"] * 4,
        1,
        4,
        [None] * 4,
    )


async def test_no_answer_is_transient_for_every_caller(zk: ZooKeeperServer) -> None:
    """With ZooKeeper paused, each delete of the unanswered multi fails transiently: unknown
    is never reported as deleted."""
    async with ZkMetadataStore.connect(zk.address, session_timeout=5, request_timeout=1) as s:
        ledgers = BookKeeperLedgers(s)
        for i in (1, 2, 3):
            await ledgers.create(ledger(i))
        deleter = ZooKeeperLedgerDeleter(s, paths=LedgerPaths(), limits=CountingLimits())
        zk.pause()
        try:
            got = await delete_all(deleter, ledgers, {1: 0, 2: 0, 3: 0})
        finally:
            zk.resume()
    assert got == ["DeleteFailed(permanent=False)"] * 3


async def test_delete_after_close_is_transient(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """Once the backend is closed a delete is not sent: a transient failure, znode kept."""
    await ledgers.create(ledger(1))
    await deleter.aclose()
    got = await delete_all(deleter, ledgers, {1: 0})
    assert (got, await store.exists(ledgers.path(1)) is not None) == (
        ["DeleteFailed(permanent=False)"],
        True,
    )
