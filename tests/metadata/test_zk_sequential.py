"""Sequential creates, children watches and the children version, against a real server."""

from __future__ import annotations

import asyncio

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.metadata import NoNode, Versioned, WatchEvent, ZkMetadataStore


async def test_sequential_children_are_numbered_by_cversion(store: ZkMetadataStore) -> None:
    """Each sequential create gets the parent's cversion as a 10-digit suffix, and the
    parent's cversion (by get and by get_many) is the number the next one gets."""
    await store.create("/p")
    made = [(await store.create_sequential("/p/b-", bytes([n])))[0] for n in range(3)]
    single = await store.get("/p")
    batched = (await store.get_many(["/p"]))[0]
    assert isinstance(batched, Versioned)
    assert (made, single.cversion, batched.cversion) == (
        ["/p/b-0000000000", "/p/b-0000000001", "/p/b-0000000002"],
        3,
        3,
    )


async def test_sequential_create_needs_its_parent_unless_asked(store: ZkMetadataStore) -> None:
    """Without make_parents a missing parent is NoNode; with it, the parents are made."""
    with pytest.raises(NoNode):
        await store.create_sequential("/q/r/b-", b"")
    path, stat = await store.create_sequential("/q/r/b-", b"x", make_parents=True)
    assert (path, stat.version, (await store.get(path)).data) == ("/q/r/b-0000000000", 0, b"x")


async def test_sequential_create_under_a_chroot(zk: ZooKeeperServer) -> None:
    """The path returned is the caller's, without the chroot."""
    async with ZkMetadataStore.connect(zk.address, chroot="/cluster-a") as rooted:
        path, _stat = await rooted.create_sequential("/s/b-", b"", make_parents=True)
    assert path == "/s/b-0000000000"


async def test_children_watch_fires_on_a_new_child(store: ZkMetadataStore) -> None:
    """get_children_and_watch lists the children and fires CHANGED when one is created."""
    await store.create("/c")
    await store.create("/c/one")
    names, fired = await store.get_children_and_watch("/c")
    await store.create("/c/two")
    assert (names, await asyncio.wait_for(fired, 10)) == (["one"], WatchEvent.CHANGED)


async def test_children_watch_on_a_missing_znode_is_no_node(store: ZkMetadataStore) -> None:
    """No list, no watch: NoNode."""
    with pytest.raises(NoNode):
        await store.get_children_and_watch("/absent")
