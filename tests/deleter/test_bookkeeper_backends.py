"""BookKeeper deletes: the ledger znode on the real ZooKeeper, and the bookie HTTP API."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from devstack.zookeeper import ZooKeeperServer
from services.core.errors import Unavailable
from services.deleter.backends.bookie_http import BookieHttpDeleter
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.ports import DeleteFailed
from services.metadata import BookKeeperLedgers, LedgerMetadata, LedgerPaths, Segment
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.helpers import assert_eventually


def limits() -> BackendLimits:
    return BackendLimits(concurrency=8, per_second=10_000)


def ledger(ledger_id: int) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        segments=(Segment(0, ("b1:3181",)),),
        custom_metadata={"application": b"pulsar", "component": b"managed-ledger"},
    )


@pytest.fixture
async def store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(zk.address, session_timeout=5, request_timeout=5) as s:
        yield s


@pytest.fixture
def ledgers(store: ZkMetadataStore) -> BookKeeperLedgers:
    return BookKeeperLedgers(store)


@pytest.fixture
def deleter(store: ZkMetadataStore) -> ZooKeeperLedgerDeleter:
    return ZooKeeperLedgerDeleter(store, paths=LedgerPaths(), limits=limits())


async def test_deletes_the_znode_and_its_empty_parents(
    ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """The ledger znode goes at its version; the sweep a moment later removes the parents
    it left empty, and keeps the parent a sibling still uses."""
    deleter = ZooKeeperLedgerDeleter(
        store, paths=LedgerPaths(), limits=limits(), parent_sweep_delay=0.01
    )
    await ledgers.create(ledger(1))
    await ledgers.create(ledger(20001))
    result = await deleter.delete_ledger(ledger_id=1, path=ledgers.path(1), version=0)
    assert (result.removed, await store.exists(ledgers.path(1))) == (True, None)

    async def parents_gone() -> None:
        assert None is await store.exists("/ledgers/00/0000")

    await assert_eventually(parents_gone)
    assert await store.exists("/ledgers/00") is not None
    assert await store.exists(ledgers.path(20001)) is not None
    await deleter.aclose()


class _CountedDeletes:
    """The real store, counting the single deletes asked of each path."""

    def __init__(self, store: ZkMetadataStore) -> None:
        self._store = store
        self.deletes: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def delete(self, path: str, *, version: int) -> None:
        self.deletes[path] += 1
        await self._store.delete(path, version=version)


async def test_a_sweep_tries_each_directory_once(
    ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """Many ledgers of one directory deleted before a sweep: the sweep asks the store to
    delete that directory once, not once per ledger, and still goes upwards from a
    directory it emptied."""
    counted = _CountedDeletes(store)
    deleter = ZooKeeperLedgerDeleter(
        cast(MetadataStore, counted), paths=LedgerPaths(), limits=limits(), parent_sweep_delay=3600
    )
    for ledger_id in [*range(1, 11), 20001]:
        await ledgers.create(ledger(ledger_id))
    for ledger_id in [*range(1, 10), 20001]:
        await deleter.delete_ledger(ledger_id=ledger_id, path=ledgers.path(ledger_id), version=0)
    await deleter.aclose()  # the last sweep
    swept = {path: n for path, n in counted.deletes.items() if "/L" not in path}
    assert swept == {"/ledgers/00/0000": 1, "/ledgers/00/0002": 1, "/ledgers/00": 1}
    assert await store.exists("/ledgers/00/0002") is None
    assert await store.exists(ledgers.path(10)) is not None


async def test_close_runs_the_last_sweep(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """Parents pending at close are still removed (the sweep is not lost on shutdown)."""
    await ledgers.create(ledger(1))
    await deleter.delete_ledger(ledger_id=1, path=ledgers.path(1), version=0)
    await deleter.aclose()
    assert None is await store.exists("/ledgers/00")


class CountedLimits(BackendLimits):
    """The limits, counting the single operations (parent removals) that take them."""

    operations = 0

    @contextlib.asynccontextmanager
    async def operation(self, weight: float = 1.0) -> AsyncIterator[None]:
        self.operations += 1
        async with super().operation(weight):
            yield


async def test_thirty_ledgers_of_a_directory_cost_the_sweep_two_tries(
    ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """Thirty deleted ledgers of one directory cost the sweep one try of that directory and
    one of its parent (which a sibling keeps), not a try per ledger."""
    counted = CountedLimits(concurrency=8, per_second=10_000)
    deleter = ZooKeeperLedgerDeleter(
        store, paths=LedgerPaths(), limits=counted, parent_sweep_delay=3600
    )
    ids = range(1, 31)
    for ledger_id in [*ids, 20001]:
        await ledgers.create(ledger(ledger_id))
    for ledger_id in ids:
        await deleter.delete_ledger(ledger_id=ledger_id, path=ledgers.path(ledger_id), version=0)
    before = counted.operations
    await deleter.sweep_parents()
    assert counted.operations - before == 2
    assert None is await store.exists("/ledgers/00/0000")
    assert await store.exists(ledgers.path(20001)) is not None
    await deleter.aclose()


async def test_missing_znode_counts_as_deleted(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers
) -> None:
    """NoNode is success, reported as not removed by us."""
    result = await deleter.delete_ledger(ledger_id=5, path=ledgers.path(5), version=0)
    assert False is result.removed


async def test_changed_metadata_is_not_deleted(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """A version other than the verified one is a transient failure; the znode stays."""
    await ledgers.create(ledger(1))
    await ledgers.write(ledger(1), version=0)
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_ledger(ledger_id=1, path=ledgers.path(1), version=0)
    assert False is failure.value.permanent
    assert await store.exists(ledgers.path(1)) is not None


async def test_evidence_path_of_another_ledger_is_refused(
    deleter: ZooKeeperLedgerDeleter, ledgers: BookKeeperLedgers, store: ZkMetadataStore
) -> None:
    """A path naming another ledger (or outside the root) is permanent; nothing is deleted."""
    await ledgers.create(ledger(2))
    for path in (ledgers.path(2), "/elsewhere/00/0000/L0001"):
        with pytest.raises(DeleteFailed) as failure:
            await deleter.delete_ledger(ledger_id=1, path=path, version=0)
        assert failure.value.permanent
    assert await store.exists(ledgers.path(2)) is not None


async def test_store_outage_is_transient(ledgers: BookKeeperLedgers, zk: ZooKeeperServer) -> None:
    """With ZooKeeper paused the outcome is unknown: a transient failure, never success, and an
    outage (the deleter pauses instead of spending a retry); the probe fails meanwhile."""
    await ledgers.create(ledger(1))
    async with ZkMetadataStore.connect(zk.address, session_timeout=5, request_timeout=1) as s:
        deleter = ZooKeeperLedgerDeleter(s, paths=LedgerPaths(), limits=limits())
        zk.pause()
        try:
            with pytest.raises(DeleteFailed) as failure:
                await deleter.delete_ledger(ledger_id=1, path=ledgers.path(1), version=0)
            with pytest.raises(Unavailable):
                await deleter.probe()
        finally:
            zk.resume()
        await deleter.probe()  # ZooKeeper answers again
    assert (failure.value.permanent, failure.value.outage) == (False, True)


class FakeBookie:
    """A bookie's HTTP admin endpoint (no bookie runs in the local stack)."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.status = 200

    async def handle(self, request: web.Request) -> web.Response:
        if request.method != "DELETE":
            return web.Response(status=404, text="Not found method. Should be DELETE method")
        if self.status != 200:
            return web.Response(status=self.status, text="boom")
        self.deleted.append(request.query["ledger_id"])
        return web.json_response(f"Deleted ledger: {request.query['ledger_id']}")


@pytest.fixture
async def bookie() -> AsyncIterator[tuple[FakeBookie, BookieHttpDeleter]]:
    fake = FakeBookie()
    app = web.Application()
    app.router.add_route("*", "/api/v1/ledger/delete", fake.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    async with aiohttp.ClientSession() as session:
        yield fake, BookieHttpDeleter(session, base_url=f"http://127.0.0.1:{port}", limits=limits())
    await runner.cleanup()


async def test_bookie_http_deletes_by_ledger_id(
    bookie: tuple[FakeBookie, BookieHttpDeleter],
) -> None:
    """The backend sends DELETE /api/v1/ledger/delete?ledger_id=<id>."""
    fake, deleter = bookie
    result = await deleter.delete_ledger(ledger_id=77, path="/ledgers/00/0000/L0077", version=3)
    assert (fake.deleted, result.removed) == (["77"], True)


async def test_bookie_http_server_error_is_transient(
    bookie: tuple[FakeBookie, BookieHttpDeleter],
) -> None:
    """A 500 from the bookie is retried later, not reported as deleted."""
    fake, deleter = bookie
    fake.status = 500
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_ledger(ledger_id=77, path="/ledgers/00/0000/L0077", version=3)
    assert False is failure.value.permanent


async def test_a_long_layout_sweeps_only_the_ledgers_own_levels(
    store: ZkMetadataStore,
) -> None:
    """Under a long-hierarchical `LAYOUT` a ledger at the long path is deleted and its four
    empty levels removed, never the root; one at Pulsar's hybrid path is accepted too."""
    from services.metadata import LedgerLayout
    from services.metadata.paths import LedgerLocations

    locations = LedgerLocations(layout=LedgerLayout.LONG_HIERARCHICAL)
    deleter = ZooKeeperLedgerDeleter(
        store, locations=lambda: locations, limits=limits(), parent_sweep_delay=0.01
    )
    long_path, hybrid_path = locations.paths(1)
    await store.create(long_path, b"x", make_parents=True)
    await store.create("/ledgers/LAYOUT", b"")
    first = await deleter.delete_ledger(ledger_id=1, path=long_path, version=0)
    await store.create(hybrid_path, b"x", make_parents=True)
    second = await deleter.delete_ledger(ledger_id=1, path=hybrid_path, version=0)

    async def swept() -> None:
        assert (await store.exists("/ledgers/000"), await store.exists("/ledgers/00")) == (
            None,
            None,
        )

    await assert_eventually(swept)
    assert (first.removed, second.removed) == (True, True)
    assert await store.exists("/ledgers") is not None
