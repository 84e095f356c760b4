"""`ZkMetadataStore.get_many` (ZooKeeper's multiRead) against a real server."""

from __future__ import annotations

from devstack.zookeeper import ZooKeeperServer
from services.metadata import MetadataError, StoreUnavailable, ZkMetadataStore
from services.metadata.zookeeper.store import MULTI_READ_CHUNK
from services.metadata.zookeeper.wire import MultiReadResponse
from tests.helpers import assert_eventually


async def test_each_result_equals_get(store: ZkMetadataStore) -> None:
    """For present znodes, get_many returns exactly what get returns (data, version, times)."""
    await store.create("/a", b"alpha")
    await store.create("/b", b"")
    await store.set("/a", b"alpha-2", version=0)
    paths = ["/a", "/b"]
    expected = [await store.get(path) for path in paths]
    assert expected == await store.get_many(paths)


async def test_absence_is_per_path(store: ZkMetadataStore) -> None:
    """An absent znode is None in its own slot; the reads beside it still succeed."""
    await store.create("/present", b"v")
    got = await store.get_many(["/missing", "/present", "/also/missing"])
    assert [None, await store.get("/present"), None] == got


async def test_all_absent(store: ZkMetadataStore) -> None:
    """A batch of absent znodes is all None (each was a successful read of absence)."""
    assert await store.get_many(["/x", "/y"]) == [None, None]


async def test_empty_batch(store: ZkMetadataStore) -> None:
    """No paths, no request: an empty list."""
    assert await store.get_many([]) == []


async def test_batches_over_the_chunk_limit_keep_order(store: ZkMetadataStore) -> None:
    """More paths than one request carries are split in chunks; results stay in order."""
    count = 2 * MULTI_READ_CHUNK + 7
    await store.create("/many")
    for number in range(0, count, 2):
        await store.create(f"/many/n{number}", str(number).encode())
    got = await store.get_many([f"/many/n{number}" for number in range(count)])
    expected = [str(n).encode() if n % 2 == 0 else None for n in range(count)]
    assert expected == [getattr(result, "data", result) for result in got]


async def test_malformed_path_fails_only_its_slot(store: ZkMetadataStore) -> None:
    """A path that is not absolute is a MetadataError for that path; the others are read."""
    await store.create("/ok", b"1")
    got = await store.get_many(["/ok", "relative"])
    assert (await store.get("/ok"), MetadataError, "relative") == (
        got[0],
        type(got[1]),
        getattr(got[1], "path", None),
    )


async def test_chroot_applies(zk: ZooKeeperServer, store: ZkMetadataStore) -> None:
    """Under a chroot, the paths are read relative to it, like get."""
    await store.create("/root/x", b"in-root", make_parents=True)
    async with ZkMetadataStore.connect(zk.address, chroot="/root") as rooted:
        assert [await rooted.get("/x"), None] == await rooted.get_many(["/x", "/y"])


async def test_stopped_server_is_unavailable_never_absent(zk: ZooKeeperServer) -> None:
    """With the server down every slot is StoreUnavailable naming its path (present and
    absent znodes alike, never None); once it is back the same store reads again."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=10.0, request_timeout=1.0
    ) as store:
        await store.create("/kept", b"v")
        zk.stop()
        try:
            got = await store.get_many(["/kept", "/absent"])
        finally:
            zk.start()
        assert [(StoreUnavailable, "/kept"), (StoreUnavailable, "/absent")] == [
            (type(result), getattr(result, "path", None)) for result in got
        ]

        async def readable() -> None:
            result = (await store.get_many(["/kept"]))[0]
            assert getattr(result, "data", result) == b"v"

        await assert_eventually(readable, timeout=40, interval=0.5)


def test_undecodable_reply_is_reported_not_raised() -> None:
    """A truncated reply is flagged as malformed (raising would abort aiozk's connection)."""
    response = MultiReadResponse.deserialize(b"\x00\x00\x00\x04\x00")
    assert (response.malformed is not None, response.results) == (True, [])
