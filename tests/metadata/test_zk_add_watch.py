"""`ZkMetadataStore.add_recursive_watch` (ZooKeeper's addWatch, PERSISTENT_RECURSIVE) against
a real server."""

from __future__ import annotations

from devstack.zookeeper import ZooKeeperServer
from services.metadata import WatchEvent, ZkMetadataStore
from tests.helpers import assert_eventually

Seen = list[tuple[WatchEvent, str]]


async def _watched(store: ZkMetadataStore, path: str) -> Seen:
    seen: Seen = []
    await store.add_recursive_watch(path, lambda kind, changed: seen.append((kind, changed)))
    return seen


async def test_every_change_below_the_path_is_reported_and_the_watch_stays(
    store: ZkMetadataStore,
) -> None:
    """Creates, data changes and deletes at any depth below the path are reported, each with
    the znode's own path, and the watch keeps firing after its first event."""
    await store.create("/w")
    seen = await _watched(store, "/w")
    await store.create("/w/a/b", b"1", make_parents=True)
    await store.set("/w/a/b", b"2", version=0)
    await store.set("/w/a/b", b"3", version=1)
    await store.delete("/w/a/b", version=2)
    await store.create("/elsewhere")
    expected = [
        (WatchEvent.CREATED, "/w/a"),
        (WatchEvent.CREATED, "/w/a/b"),
        (WatchEvent.CHANGED, "/w/a/b"),
        (WatchEvent.CHANGED, "/w/a/b"),
        (WatchEvent.DELETED, "/w/a/b"),
    ]

    async def all_seen() -> None:
        assert expected == seen

    await assert_eventually(all_seen)


async def test_one_shot_watches_beside_it_still_fire(store: ZkMetadataStore) -> None:
    """A one-shot data watch on a path below the recursive one fires as before."""
    await store.create("/w/x", b"", make_parents=True)
    seen = await _watched(store, "/w")
    _, fired = await store.get_and_watch("/w/x")
    await store.set("/w/x", b"1", version=0)
    assert await fired == WatchEvent.CHANGED

    async def seen_too() -> None:
        assert seen == [(WatchEvent.CHANGED, "/w/x")]

    await assert_eventually(seen_too)


async def test_chroot_paths_are_relative(zk: ZooKeeperServer, store: ZkMetadataStore) -> None:
    """Under a chroot, the watch is set on the chroot's path and events name paths relative
    to it."""
    await store.create("/root/w", make_parents=True)
    async with ZkMetadataStore.connect(zk.address, chroot="/root") as rooted:
        seen = await _watched(rooted, "/w")
        await rooted.create("/w/n", b"1")
        await store.create("/w", b"")  # outside the chroot: not watched

    async def relative() -> None:
        assert seen == [(WatchEvent.CREATED, "/w/n")]

    await assert_eventually(relative)


async def test_session_helpers(store: ZkMetadataStore) -> None:
    """The session id is the owner of this session's ephemeral znodes; a connected store
    returns from wait_connected at once, and its loss future is pending."""
    stat = await store.create("/eph", ephemeral=True)
    await store.wait_connected()
    lost = store.connection_lost()
    assert (store.session_id, False) == (stat.ephemeral_owner, lost.done())
    lost.cancel()
