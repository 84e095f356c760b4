"""The `MetadataStore` contract, the same on every adapter. Where stores differ by design
(version numbers, `last_zxid`), the port's promise is asserted, not one store's numbers."""

from __future__ import annotations

import asyncio
import re

import pytest

from services.metadata.errors import (
    MetadataError,
    NodeExists,
    NoNode,
    NotEmpty,
    Unsupported,
    VersionConflict,
)
from services.metadata.store import MetadataStore, WatchEvent

from .conftest import Opener, eventually

WAIT = 10.0  # bounds a hung test only


async def test_the_session_members(store: MetadataStore):
    assert store.connected
    await asyncio.wait_for(store.wait_connected(), WAIT)
    assert store.session_id is not None
    assert store.last_zxid is None or isinstance(store.last_zxid, int)
    lost = store.connection_lost()
    assert not lost.done()
    lost.cancel()


async def test_create_get_set_delete_with_versions(store: MetadataStore):
    created = await store.create("/c", b"one")
    read = await store.get("/c")
    assert (read.data, read.version) == (b"one", created.version)
    assert read.czxid == created.czxid
    new_version = await store.set("/c", b"two", version=created.version)
    assert new_version > created.version
    again = await store.get("/c")
    assert (again.data, again.version, again.czxid) == (b"two", new_version, created.czxid)
    assert again.mtime_ms >= again.ctime_ms
    with pytest.raises(VersionConflict):
        await store.set("/c", b"three", version=created.version)
    with pytest.raises(VersionConflict):
        await store.delete("/c", version=created.version)
    await store.delete("/c", version=new_version)
    with pytest.raises(NoNode):
        await store.get("/c")
    assert await store.exists("/c") is None


async def test_versions_strictly_increase_across_writes_of_one_key(store: MetadataStore):
    version = (await store.create("/v", b"0")).version
    await store.create("/other", b"")
    for n in range(1, 6):
        await store.set("/other", b"%d" % n, version=(await store.get("/other")).version)
        written = await store.set("/v", b"%d" % n, version=version)
        assert written > version
        version = written


async def test_typed_refusals(store: MetadataStore):
    await store.create("/e", b"")
    with pytest.raises(NodeExists):
        await store.create("/e", b"")
    with pytest.raises(NoNode):
        await store.get("/missing")
    with pytest.raises(NoNode):
        await store.set("/missing", b"", version=0)
    with pytest.raises(NoNode):
        await store.delete("/missing", version=0)
    with pytest.raises(NoNode):
        await store.create("/no/parent", b"")
    with pytest.raises(NoNode):
        await store.get_children("/missing")
    with pytest.raises(MetadataError):
        await store.get("relative")


async def test_make_parents_and_not_empty(store: MetadataStore):
    stat = await store.create("/p/q/r", b"leaf", make_parents=True)
    assert stat.data_length == 4
    assert (await store.get("/p/q")).data == b""
    parent = await store.exists("/p")
    assert parent is not None
    assert parent.num_children == 1
    with pytest.raises(NotEmpty):
        await store.delete("/p/q", version=(await store.get("/p/q")).version)
    assert await store.exists("/p/q/r") is not None


async def test_children_are_direct_and_relative(store: MetadataStore):
    await store.create("/k/a", b"", make_parents=True)
    await store.create("/k/b/deep", b"", make_parents=True)
    await store.create("/k2", b"")
    await store.create("/j/x", b"", make_parents=True)
    assert sorted(await store.get_children("/k")) == ["a", "b"]
    assert sorted(await store.get_children("/k/b")) == ["deep"]
    assert await store.get_children("/k/a") == []
    root = await store.get_children("/")
    assert {"k", "k2", "j"} <= set(root)


async def test_sequential_creates_count_from_zero_with_cversion(store: MetadataStore):
    with pytest.raises(NoNode):
        await store.create_sequential("/seq/b-", b"")
    names = []
    for n in range(4):
        path, stat = await store.create_sequential("/seq/b-", b"%d" % n, make_parents=True)
        assert re.fullmatch(r"/seq/b-\d{10}", path)
        assert (await store.get(path)).data == b"%d" % n
        assert stat.data_length == 1
        names.append(int(path[-10:]))
    assert names == [0, 1, 2, 3]
    parent = await store.get("/seq")
    assert parent.cversion == 4  # children below cversion were created
    assert sorted(await store.get_children("/seq")) == [f"b-{n:010d}" for n in range(4)]


async def test_concurrent_sequential_creates_get_distinct_numbers(store: MetadataStore):
    await store.create("/cs", b"")
    made = await asyncio.gather(*(store.create_sequential("/cs/n-", b"") for _ in range(8)))
    numbers = sorted(int(path[-10:]) for path, _stat in made)
    assert numbers == list(range(8))
    assert (await store.get("/cs")).cversion == 8


async def test_get_many_reports_each_path(store: MetadataStore):
    await store.create("/m/a", b"A", make_parents=True)
    await store.create("/m/c", b"C")
    results = await store.get_many(["/m/a", "/m/b", "/m/c", "/m/a"])
    assert [getattr(r, "data", r) for r in results] == [b"A", None, b"C", b"A"]
    assert await store.get_many([]) == []


async def test_delete_many_contract(store: MetadataStore):
    v1 = (await store.create("/d1", b"")).version
    v2 = (await store.create("/d2", b"")).version
    await store.create("/d3/child", b"", make_parents=True)
    v3 = (await store.get("/d3")).version
    items = [("/d1", v1), ("/d2", v2 + 1000), ("/gone", 0), ("/d3", v3)]
    outcomes = await store.delete_many(items)
    assert len(outcomes) == len(items)
    if any(isinstance(outcome, Unsupported) for outcome in outcomes):
        # The store cannot batch: nothing was deleted.
        assert all(isinstance(outcome, Unsupported) for outcome in outcomes)
        assert await store.exists("/d1") is not None
        return
    assert outcomes[0] is None
    assert await store.exists("/d1") is None
    assert isinstance(outcomes[1], VersionConflict)
    assert await store.exists("/d2") is not None
    assert isinstance(outcomes[2], NoNode)
    assert isinstance(outcomes[3], NotEmpty)
    assert await store.exists("/d3") is not None


async def test_delete_many_refuses_exactly_the_keys_with_children(store: MetadataStore):
    """Among siblings deleted together, only those with children are `NotEmpty`: a child
    of a sibling outside the batch, or a grandchild, refuses nothing; names that are
    prefixes of others (`a`, `aa`) and keys under other parents are told apart."""
    for path in ["/s/a", "/s/aa/kid", "/s/b", "/s/c/kid/grand", "/s/d", "/s/e", "/t/a/kid"]:
        await store.create(path, b"", make_parents=True)
    await store.create("/s/ab/kid", b"", make_parents=True)  # a sibling outside the batch
    batch = ["/s/a", "/s/aa", "/s/b", "/s/c/kid", "/s/d", "/t/a", "/s/e"]
    versions = [(await store.get(path)).version for path in batch]
    outcomes = await store.delete_many(list(zip(batch, versions, strict=True)))
    if any(isinstance(outcome, Unsupported) for outcome in outcomes):
        return  # the store cannot batch (`test_delete_many_contract`)
    refused = {path for path, outcome in zip(batch, outcomes, strict=True) if outcome}
    assert refused == {"/s/aa", "/s/c/kid", "/t/a"}
    assert all(isinstance(outcomes[batch.index(path)], NotEmpty) for path in refused)
    for path in batch:
        assert (await store.exists(path) is not None) == (path in refused)
    assert await store.exists("/s/ab/kid") is not None


async def test_delete_many_of_one_key_twice_deletes_it_once(store: MetadataStore):
    """The same item twice in one call: one of them deletes the key, the other finds it
    gone (`NoNode`); neither is left unknown."""
    version = (await store.create("/twice", b"")).version
    outcomes = await store.delete_many([("/twice", version), ("/twice", version)])
    if any(isinstance(outcome, Unsupported) for outcome in outcomes):
        return  # the store cannot batch (`test_delete_many_contract`)
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["NoNode", "NoneType"]
    assert await store.exists("/twice") is None


async def test_data_watches_fire_on_change_and_delete(store: MetadataStore):
    created = await store.create("/w", b"")
    _read, fired = await store.get_and_watch("/w")
    version = await store.set("/w", b"x", version=created.version)
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CHANGED
    _read, fired = await store.get_and_watch("/w")
    await store.delete("/w", version=version)
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.DELETED


async def test_watch_fires_on_create_of_an_absent_node(store: MetadataStore):
    stat, fired = await store.watch("/later")
    assert stat is None
    await store.create("/later", b"")
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CREATED
    stat, fired = await store.watch("/later")
    assert stat is not None
    await store.set("/later", b"x", version=stat.version)
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CHANGED


async def test_a_cancelled_watch_is_harmless(store: MetadataStore):
    await store.create("/cw", b"")
    _stat, fired = await store.watch("/cw")
    fired.cancel()
    await store.set("/cw", b"x", version=(await store.get("/cw")).version)
    _read, again = await store.get_and_watch("/cw")
    again.cancel()


async def test_children_watch_fires_on_child_create_and_delete(store: MetadataStore):
    await store.create("/cw/a", b"", make_parents=True)
    names, fired = await store.get_children_and_watch("/cw")
    assert names == ["a"]
    await store.create("/cw/b", b"")
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CHANGED
    _names, fired = await store.get_children_and_watch("/cw")
    await store.delete("/cw/a", version=(await store.get("/cw/a")).version)
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CHANGED


async def test_recursive_watch_sees_creates_changes_and_deletes_below(store: MetadataStore):
    await store.create("/r", b"")
    seen: list[tuple[WatchEvent, str]] = []
    await store.add_recursive_watch("/r", lambda kind, path: seen.append((kind, path)))
    stat = await store.create("/r/a", b"", make_parents=True)
    await store.create("/r/a/b", b"")
    await store.create("/elsewhere", b"")
    await store.set("/r/a", b"x", version=stat.version)
    await store.delete("/r/a/b", version=(await store.get("/r/a/b")).version)
    expected = [
        (WatchEvent.CREATED, "/r/a"),
        (WatchEvent.CREATED, "/r/a/b"),
        (WatchEvent.CHANGED, "/r/a"),
        (WatchEvent.DELETED, "/r/a/b"),
    ]

    async def all_seen() -> bool:
        return all(event in seen for event in expected)

    await eventually(all_seen, f"recursive events {expected}, got {seen}")
    # At or below the path only (a store may report a change made just before the watch).
    assert all(path == "/r" or path.startswith("/r/") for _kind, path in seen)


async def test_ephemerals_belong_to_their_session_and_go_with_it(
    store: MetadataStore, open_store: Opener
):
    await store.create("/eph", b"")
    async with open_store() as other:
        made = await other.create("/eph/mine", b"x", ephemeral=True)
        assert made.ephemeral_owner == other.session_id
        seen = await store.exists("/eph/mine")
        assert seen is not None
        assert seen.ephemeral_owner != store.session_id
        assert seen.ephemeral_owner != 0
        _stat, fired = await store.watch("/eph/mine")
    assert (await store.exists("/eph")) is not None

    async def gone() -> bool:
        return await store.exists("/eph/mine") is None

    await eventually(gone, "the ephemeral node removed with its session")
    assert await asyncio.wait_for(fired, WAIT) is WatchEvent.DELETED
    persistent = await store.exists("/eph")
    assert persistent is not None
    assert persistent.ephemeral_owner == 0


async def test_ephemeral_sequential_creates_are_numbered_and_go_with_their_session(
    store: MetadataStore, open_store: Opener
):
    """A PIP-454 participant's registration: numbered as the persistent ones are, the parent
    made persistent, the child owned by its session and removed with it."""
    async with open_store() as other:
        first, made = await other.create_sequential(
            "/parts/id-", b"", make_parents=True, ephemeral=True
        )
        second, _stat = await other.create_sequential("/parts/id-", b"", ephemeral=True)
        assert (first, second) == ("/parts/id-0000000000", "/parts/id-0000000001")
        assert made.ephemeral_owner == other.session_id
        seen = await store.exists(first)
        assert seen is not None
        assert seen.ephemeral_owner not in (0, store.session_id)

    async def gone() -> bool:
        return await store.get_children("/parts") == []

    await eventually(gone, "the ephemeral sequential nodes removed with their session")
    parent = await store.exists("/parts")
    assert parent is not None
    assert parent.ephemeral_owner == 0
    again, _stat = await store.create_sequential("/parts/id-", b"", ephemeral=True)
    # Not given out twice (ZooKeeper counts the deletes too: its next number is 4).
    assert int(again.removeprefix("/parts/id-")) >= 2


async def test_sync_then_read_sees_another_session_s_write(
    store: MetadataStore, open_store: Opener
):
    """After `sync`, this session reads what another session committed before the call."""
    async with open_store() as other:
        await other.create("/synced", b"1")
    await asyncio.wait_for(store.sync("/"), WAIT)
    assert (await store.get("/synced")).data == b"1"
