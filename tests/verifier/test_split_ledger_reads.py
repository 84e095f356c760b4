"""Ledger reads from BookKeeper's own store (`MetadataZnodeStore(sync_after_reads=...)`):
each read is followed by a sync of Pulsar's session, so the owner read next is at least as
new; a sync that fails leaves the read unknown, never "absent"."""

from __future__ import annotations

import contextlib

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore
from services.verifier.store_adapter import MetadataZnodeStore, ZooKeeperUnavailable


async def test_ledger_reads_come_from_bookkeeper_s_store(zk: ZooKeeperServer) -> None:
    """Present and absent znodes read from BookKeeper's chroot, with Pulsar's synced."""
    async with (
        ZkMetadataStore.connect(zk.address, chroot="/bk") as bookkeeper,
        ZkMetadataStore.connect(zk.address, chroot="/pulsar") as pulsar,
    ):
        await bookkeeper.create("/ledgers/L1", b"meta", make_parents=True)
        await pulsar.create("/managed-ledgers", make_parents=True)
        ledgers = MetadataZnodeStore(bookkeeper, sync_after_reads=pulsar)
        found = await ledgers.read("/ledgers/L1")
        assert found is not None
        assert found.data == b"meta"
        assert await ledgers.read("/ledgers/L2") is None
        many = await ledgers.read_many(["/ledgers/L1", "/ledgers/L2"])
        assert [None if got is None else type(got).__name__ for got in many] == ["Znode", None]


async def test_a_failed_sync_makes_an_absent_ledger_unknown(zk: ZooKeeperServer) -> None:
    """Pulsar's session gone: a ledger read, even of an absent znode, is `Unavailable`."""
    async with contextlib.AsyncExitStack() as stack:
        bookkeeper = await stack.enter_async_context(
            ZkMetadataStore.connect(zk.address, chroot="/bk")
        )
        await bookkeeper.create("/ledgers", make_parents=True)
        async with ZkMetadataStore.connect(zk.address, request_timeout=1.0) as pulsar:
            ledgers = MetadataZnodeStore(bookkeeper, sync_after_reads=pulsar)
        with pytest.raises(ZooKeeperUnavailable):
            await ledgers.read("/ledgers/L2")
        with pytest.raises(ZooKeeperUnavailable):
            await ledgers.read_many(["/ledgers/L2"])
