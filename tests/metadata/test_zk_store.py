"""The ZooKeeper adapter against a real server: CAS, typed errors, watches, outages."""

from __future__ import annotations

import asyncio

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.metadata import (
    MetadataError,
    NodeExists,
    NoNode,
    StoreUnavailable,
    VersionConflict,
    WatchEvent,
    ZkMetadataStore,
)
from services.metadata.errors import NotEmpty
from tests.helpers import assert_eventually


async def test_create_then_get_returns_data_and_stat(store: ZkMetadataStore) -> None:
    """A created znode reads back with version 0 and its creation time and zxid."""
    stat = await store.create("/a", b"hello")
    got = await store.get("/a")
    assert (b"hello", 0, stat.czxid, stat.ctime_ms) == (
        got.data,
        got.version,
        got.czxid,
        got.ctime_ms,
    )
    assert got.ctime_ms > 0


async def test_set_at_current_version_bumps_version(store: ZkMetadataStore) -> None:
    """A compare-and-set at the current version succeeds and returns the next version."""
    await store.create("/a", b"1")
    assert await store.set("/a", b"2", version=0) == 1
    assert ((await store.get("/a")).data, (await store.get("/a")).version) == (b"2", 1)


async def test_set_at_stale_version_conflicts(store: ZkMetadataStore) -> None:
    """A compare-and-set at a stale version raises VersionConflict naming path and version."""
    await store.create("/a", b"1")
    await store.set("/a", b"2", version=0)
    with pytest.raises(VersionConflict) as err:
        await store.set("/a", b"3", version=0)
    assert (err.value.path, err.value.expected_version) == ("/a", 0)
    assert (await store.get("/a")).data == b"2"


async def test_delete_at_stale_version_conflicts(store: ZkMetadataStore) -> None:
    """A delete at a stale version raises VersionConflict and leaves the znode."""
    await store.create("/a", b"1")
    await store.set("/a", b"2", version=0)
    with pytest.raises(VersionConflict):
        await store.delete("/a", version=0)
    await store.delete("/a", version=1)
    assert await store.exists("/a") is None


@pytest.mark.parametrize("operation", ["get", "children", "set", "delete"])
async def test_missing_znode_is_no_node(store: ZkMetadataStore, operation: str) -> None:
    """Reads and writes of a missing znode raise NoNode naming the path."""
    calls = {
        "get": lambda: store.get("/missing"),
        "children": lambda: store.get_children("/missing"),
        "set": lambda: store.set("/missing", b"", version=0),
        "delete": lambda: store.delete("/missing", version=0),
    }
    with pytest.raises(NoNode) as err:
        await calls[operation]()
    assert err.value.path == "/missing"


async def test_exists_reports_stat_or_none(store: ZkMetadataStore) -> None:
    """exists gives the stat of a present znode and None for an absent one."""
    await store.create("/a", b"xyz")
    stat = await store.exists("/a")
    assert stat is not None
    assert (stat.version, stat.data_length, stat.num_children) == (0, 3, 0)
    assert await store.exists("/b") is None


async def test_create_existing_is_node_exists(store: ZkMetadataStore) -> None:
    """Creating a present znode raises NodeExists."""
    await store.create("/a")
    with pytest.raises(NodeExists):
        await store.create("/a")


async def test_create_needs_parents_unless_asked(store: ZkMetadataStore) -> None:
    """Without make_parents a missing parent is NoNode; with it the parents are created."""
    with pytest.raises(NoNode):
        await store.create("/p/q/r", b"x")
    await store.create("/p/q/r", b"x", make_parents=True)
    assert await store.get_children("/p") == ["q"]


async def test_container_parents_vanish_when_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    """CONTAINER parents (as Pulsar creates them) are reaped by ZooKeeper once empty.

    Runs on its own server: the reaper interval is a JVM system property
    (`znode.container.checkIntervalMs`, default one minute), passed here through the JVM's
    standard JAVA_TOOL_OPTIONS.
    """
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dznode.container.checkIntervalMs=200")
    with ZooKeeperServer() as server:
        async with ZkMetadataStore.connect(server.address) as store:
            await store.create("/c1/c2/leaf", b"x", make_parents=True, container_parents=True)
            await store.create("/p1/p2/leaf", b"x", make_parents=True)
            await store.delete("/c1/c2/leaf", version=0)
            await store.delete("/p1/p2/leaf", version=0)

            async def containers_gone() -> None:
                assert await store.exists("/c1") is None

            await assert_eventually(containers_gone, timeout=20)
            assert await store.get_children("/p1") == ["p2"]


async def test_delete_non_empty_is_not_empty(store: ZkMetadataStore) -> None:
    """Deleting a znode with children raises NotEmpty."""
    await store.create("/p/c", make_parents=True)
    with pytest.raises(NotEmpty):
        await store.delete("/p", version=0)


@pytest.mark.parametrize("path", ["relative", "/trailing/", "/double//slash"])
async def test_malformed_paths_are_rejected(store: ZkMetadataStore, path: str) -> None:
    """A path that is not absolute and canonical raises MetadataError before any request."""
    with pytest.raises(MetadataError):
        await store.get(path)


async def test_last_zxid_advances_with_writes(store: ZkMetadataStore) -> None:
    """The store reports the last zxid it saw, and it grows with each write."""
    await store.create("/a")
    before = store.last_zxid
    await store.set("/a", b"1", version=0)
    after = store.last_zxid
    assert before is not None
    assert after is not None
    assert after > before


async def test_chroot_prefixes_every_path(zk: ZooKeeperServer, store: ZkMetadataStore) -> None:
    """With a chroot, '/x' of the store is '<chroot>/x' on the server."""
    async with ZkMetadataStore.connect(zk.address, chroot="/cluster-a") as rooted:
        await rooted.create("/x", b"in-chroot")
    assert (await store.get("/cluster-a/x")).data == b"in-chroot"


async def test_watch_fires_on_change(store: ZkMetadataStore) -> None:
    """get_and_watch's future fires CHANGED when the data is written."""
    await store.create("/w", b"1")
    got, fired = await store.get_and_watch("/w")
    await store.set("/w", b"2", version=got.version)
    assert await asyncio.wait_for(fired, 10) == WatchEvent.CHANGED


async def test_sync_sees_what_another_session_committed(zk: ZooKeeperServer) -> None:
    """After `sync`, a session reads what another session committed before the call."""
    async with (
        ZkMetadataStore.connect(zk.address) as reader,
        ZkMetadataStore.connect(zk.address) as writer,
    ):
        await writer.create("/synced", b"1")
        await reader.sync("/")
        assert (await reader.get("/synced")).data == b"1"


async def test_watch_fires_on_delete(store: ZkMetadataStore) -> None:
    """get_and_watch's future fires DELETED when the znode is removed."""
    await store.create("/w", b"1")
    _, fired = await store.get_and_watch("/w")
    await store.delete("/w", version=0)
    assert await asyncio.wait_for(fired, 10) == WatchEvent.DELETED


async def test_exists_watch_fires_on_create(store: ZkMetadataStore) -> None:
    """watch() on an absent znode reports None and fires CREATED when it appears."""
    stat, fired = await store.watch("/later")
    assert stat is None
    await store.create("/later")
    assert await asyncio.wait_for(fired, 10) == WatchEvent.CREATED


async def test_watch_on_missing_znode_is_no_node(store: ZkMetadataStore) -> None:
    """get_and_watch of an absent znode raises NoNode and leaves no callback behind."""
    with pytest.raises(NoNode):
        await store.get_and_watch("/missing")
    assert not [key for key in store._session.watch_callbacks if key[1] == "/missing"]


async def test_watch_fires_on_session_loss(zk: ZooKeeperServer) -> None:
    """A frozen server (sessions time out) fires every watch with CONNECTION_LOST."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=2.0, request_timeout=2.0
    ) as store:
        await store.create("/w", b"1")
        _, fired = await store.get_and_watch("/w")
        zk.pause()
        try:
            assert await asyncio.wait_for(fired, 15) == WatchEvent.CONNECTION_LOST
        finally:
            zk.resume()


async def test_watch_fires_when_server_stops(zk: ZooKeeperServer) -> None:
    """A closed connection fires the watch with CONNECTION_LOST, not a data event."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=3.0, request_timeout=2.0
    ) as store:
        await store.create("/w", b"1")
        _, fired = await store.get_and_watch("/w")
        zk.stop()
        # The next request notices the dead connection at once.
        with pytest.raises(StoreUnavailable):
            await store.get("/w")
        assert await asyncio.wait_for(fired, 15) == WatchEvent.CONNECTION_LOST
    zk.start()


async def test_stopped_server_is_unavailable_then_recovers(zk: ZooKeeperServer) -> None:
    """With the server down, reads and writes raise StoreUnavailable (never NoNode);
    once it is back, the same store works again."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=10.0, request_timeout=1.0
    ) as store:
        await store.create("/kept", b"v")
        zk.stop()
        for call in (
            store.get("/kept"),
            store.get("/absent"),
            store.exists("/absent"),
            store.sync("/"),
            store.set("/kept", b"w", version=0),
            store.delete("/kept", version=0),
        ):
            with pytest.raises(StoreUnavailable):
                await call
        zk.start()

        async def readable() -> None:
            try:
                assert (await store.get("/kept")).data == b"v"
            except StoreUnavailable as e:
                raise AssertionError(str(e)) from e

        await assert_eventually(readable, timeout=40, interval=0.5)


async def test_paused_server_is_unavailable(zk: ZooKeeperServer) -> None:
    """A frozen server makes reads time out as StoreUnavailable, not NoNode."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=10.0, request_timeout=1.0
    ) as store:
        zk.pause()
        try:
            with pytest.raises(StoreUnavailable) as err:
                await store.get("/absent")
            assert err.value.path == "/absent"
        finally:
            zk.resume()


async def test_connect_to_nothing_is_unavailable() -> None:
    """Connecting where no server listens raises StoreUnavailable within the timeout."""
    with pytest.raises(StoreUnavailable):
        async with ZkMetadataStore.connect("127.0.0.1:1", connect_timeout=1.0):
            pass
