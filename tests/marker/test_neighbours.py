"""Reconciler requests against the other clusters sharing our BookKeeper, on the real
ZooKeeper: our metadata in chroot `/a`, the declared neighbour `east`'s in chroot `/b` (each
cluster keeps its own metadata store; `PulsarClusterMetadataSetup` with
`--existing-bk-metadata-service-uri` shares only the ledgers root)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.core.errors import Unavailable
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker
from services.marker.neighbours import Neighbours
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.marker.builders import ML_PATH, ledger, ml_bytes
from tests.marker.conftest import SETTINGS, ml_request
from tests.marker.fakes import FakePublisher
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd


@pytest.fixture
async def stores(
    zk: ZooKeeperServer, store: object
) -> AsyncIterator[tuple[ZkMetadataStore, ZkMetadataStore]]:
    async with ZkMetadataStore.connect(zk.address, request_timeout=2.0) as root:
        for chroot in ("/a", "/b"):
            await root.create(chroot)
    async with (
        ZkMetadataStore.connect(zk.address, chroot="/a", request_timeout=2.0) as ours,
        ZkMetadataStore.connect(zk.address, chroot="/b", request_timeout=2.0) as theirs,
    ):
        yield ours, theirs


def _marker(ours: ZkMetadataStore, theirs: ZkMetadataStore, publisher: FakePublisher) -> Marker:
    return Marker(
        store=ours,
        publisher=publisher,
        journal=ReceiptJournal(retry_window=timedelta(seconds=60)),
        settings=SETTINGS,
        neighbours=Neighbours({"east": theirs}),
    )


async def test_ledgers_the_neighbour_lists_are_refused(
    stores: tuple[ZkMetadataStore, ZkMetadataStore],
) -> None:
    """The same topic in both clusters (geo-replicated): ours lists 1, theirs lists 3. Of 2
    and 3, unreferenced by ours, only 2 gets a PDLI; 3 is STILL_REFERENCED naming `east`."""
    ours, theirs = stores
    await ours.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
    await theirs.create(ML_PATH, ml_bytes(ledger(3)), make_parents=True)
    publisher = FakePublisher()
    result = await _marker(ours, theirs, publisher).mark(ml_request(2, 3, source=_pd.RECONCILER))
    assert result.marked == [(2, (_pd.LEDGER,))]
    [refused] = result.not_marked
    assert (refused.ledger_id, refused.reason) == (3, _mk.STILL_REFERENCED)
    assert "'east'" in refused.message
    assert [p.ledger_id for p in publisher.pdlis] == [2]


async def test_an_owner_only_the_neighbour_has_is_theirs(
    stores: tuple[ZkMetadataStore, ZkMetadataStore],
) -> None:
    """Absent here, present in `east`: every ledger is OWNED_ELSEWHERE, nothing is sent; absent
    in both, the ledgers of a deleted topic are marked."""
    ours, theirs = stores
    await theirs.create(ML_PATH, ml_bytes(ledger(7)), make_parents=True)
    publisher = FakePublisher()
    marker = _marker(ours, theirs, publisher)
    result = await marker.mark(ml_request(5, 6, source=_pd.RECONCILER))
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [
        (5, _mk.OWNED_ELSEWHERE),
        (6, _mk.OWNED_ELSEWHERE),
    ]
    assert (result.marked, publisher.pdlis) == ([], [])
    await theirs.delete(ML_PATH, version=0)
    assert (await marker.mark(ml_request(5, source=_pd.RECONCILER))).marked == [(5, (_pd.LEDGER,))]


async def test_a_neighbour_that_cannot_be_read_fails_the_call(
    zk: ZooKeeperServer, stores: tuple[ZkMetadataStore, ZkMetadataStore]
) -> None:
    """Unknown is not negative: with the ZooKeeper stopped the call fails `Unavailable` and
    nothing is sent."""
    ours, theirs = stores
    publisher = FakePublisher()
    marker = _marker(ours, theirs, publisher)
    zk.pause()
    try:
        with pytest.raises(Unavailable):
            await marker.mark(ml_request(5, source=_pd.RECONCILER))
    finally:
        zk.resume()
    assert publisher.pdlis == []
