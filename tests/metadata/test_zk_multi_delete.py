"""`ZkMetadataStore.delete_many` (ZooKeeper's multi of conditional deletes) against a real
server, some through a proxy that counts requests on the wire or refuses `multi`."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from devstack.zk_faults import DELETE, MULTI, ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.metadata import (
    MetadataError,
    NoNode,
    Unsupported,
    VersionConflict,
    ZkMetadataStore,
)
from services.metadata.zookeeper.store import MULTI_DELETE_CHUNK
from services.metadata.zookeeper.wire import MultiDeleteResponse


def kinds(outcomes: list[MetadataError | None]) -> list[tuple[str, str | None]]:
    """Each outcome as (kind, path): "deleted" for None, else the error's class name."""
    return [("deleted", None) if o is None else (type(o).__name__, o.path) for o in outcomes]


async def existing(store: ZkMetadataStore, paths: list[str]) -> list[str]:
    return [path for path in paths if await store.exists(path) is not None]


@pytest.fixture
async def proxied(proxy: ZooKeeperFaultProxy) -> AsyncIterator[ZkMetadataStore]:
    """A store whose session goes through `proxy`."""
    async with ZkMetadataStore.connect(
        proxy.address, session_timeout=5.0, request_timeout=5.0
    ) as connected:
        yield connected


async def test_deletes_every_node_at_its_version_in_one_multi(
    proxied: ZkMetadataStore, proxy: ZooKeeperFaultProxy
) -> None:
    """Several znodes, each at its own current version, go in one multi request."""
    paths = ["/a", "/b", "/c"]
    for path in paths:
        await proxied.create(path, b"x")
    await proxied.set("/b", b"y", version=0)
    await proxied.set("/c", b"y", version=0)
    await proxied.set("/c", b"z", version=1)
    got = await proxied.delete_many([("/a", 0), ("/b", 1), ("/c", 2)])
    assert (
        got,
        await existing(proxied, paths),
        proxy.requests[MULTI],
        proxy.requests[DELETE],
    ) == ([None, None, None], [], 1, 0)


async def test_a_mixed_batch_deletes_exactly_the_good_ones(
    proxied: ZkMetadataStore, proxy: ZooKeeperFaultProxy
) -> None:
    """A wrong version and an absent znode among good ones: only the good ones are deleted;
    the wrong one is a VersionConflict and stays, the absent one is NoNode. Each failing
    delete costs one more round (three multis here)."""
    for path in ("/g1", "/stale", "/g2", "/g3"):
        await proxied.create(path, b"x")
    await proxied.set("/stale", b"changed", version=0)
    items = [("/g1", 0), ("/stale", 0), ("/g2", 0), ("/absent", 0), ("/g3", 0)]
    got = await proxied.delete_many(items)
    assert kinds(got) == [
        ("deleted", None),
        ("VersionConflict", "/stale"),
        ("deleted", None),
        ("NoNode", "/absent"),
        ("deleted", None),
    ]
    left = await existing(proxied, ["/g1", "/stale", "/g2", "/absent", "/g3"])
    assert (
        left,
        (await proxied.get("/stale")).data,
        proxy.requests[MULTI],
    ) == (["/stale"], b"changed", 3)


async def test_every_delete_failing(store: ZkMetadataStore) -> None:
    """When no delete can succeed, each gets its own error and nothing is deleted."""
    await store.create("/v1", b"x")
    await store.create("/v2", b"x")
    got = await store.delete_many([("/v1", 3), ("/gone", 0), ("/v2", 1)])
    assert (kinds(got), await existing(store, ["/v1", "/v2"])) == (
        [("VersionConflict", "/v1"), ("NoNode", "/gone"), ("VersionConflict", "/v2")],
        ["/v1", "/v2"],
    )


async def test_conflict_names_the_expected_version(store: ZkMetadataStore) -> None:
    """A VersionConflict carries the version the caller expected."""
    await store.create("/n", b"x")
    (got,) = await store.delete_many([("/n", 7)])
    assert (VersionConflict, 7) == (type(got), getattr(got, "expected_version", None))


async def test_empty_input_sends_nothing(
    proxied: ZkMetadataStore, proxy: ZooKeeperFaultProxy
) -> None:
    """No items: an empty list and no request."""
    assert (await proxied.delete_many([]), proxy.requests[MULTI]) == ([], 0)


async def test_a_single_item(store: ZkMetadataStore) -> None:
    """One item is deleted like a plain delete."""
    await store.create("/only", b"x")
    assert (await store.delete_many([("/only", 0)]), await store.exists("/only")) == ([None], None)


async def test_a_node_with_children_is_not_empty(store: ZkMetadataStore) -> None:
    """Another error code of the server (NOTEMPTY) is typed for its item only."""
    await store.create("/parent/child", make_parents=True)
    await store.create("/leaf")
    got = await store.delete_many([("/parent", 0), ("/leaf", 0)])
    assert (
        kinds(got),
        await existing(store, ["/parent", "/leaf"]),
    ) == ([("NotEmpty", "/parent"), ("deleted", None)], ["/parent"])


async def test_malformed_path_fails_only_its_item(store: ZkMetadataStore) -> None:
    """A path that is not absolute is a MetadataError for that item and is never sent."""
    await store.create("/ok", b"1")
    got = await store.delete_many([("relative", 0), ("/ok", 0)])
    assert (
        kinds(got),
        await store.exists("/ok"),
    ) == ([("MetadataError", "relative"), ("deleted", None)], None)


async def test_the_same_path_twice(store: ZkMetadataStore) -> None:
    """A path listed twice is deleted once; the other item finds it gone (NoNode)."""
    await store.create("/twice", b"x")
    got = await store.delete_many([("/twice", 0), ("/twice", 0)])
    assert sorted(kinds(got), key=str) == [("NoNode", "/twice"), ("deleted", None)]


async def test_chroot_applies(zk: ZooKeeperServer, store: ZkMetadataStore) -> None:
    """Under a chroot, the paths are relative to it, like delete."""
    await store.create("/root/x", b"in-root", make_parents=True)
    async with ZkMetadataStore.connect(zk.address, chroot="/root") as rooted:
        got = await rooted.delete_many([("/x", 0), ("/y", 0)])
    assert (
        kinds(got),
        await store.exists("/root/x"),
    ) == ([("deleted", None), ("NoNode", "/y")], None)


async def test_batches_over_the_chunk_limit_keep_order(store: ZkMetadataStore) -> None:
    """More items than one multi carries are split in chunks; outcomes stay in order."""
    count = MULTI_DELETE_CHUNK + 7
    await store.create("/many")
    await asyncio.gather(*(store.create(f"/many/n{n}") for n in range(0, count, 2)))
    got = await store.delete_many([(f"/many/n{n}", 0) for n in range(count)])
    expected = [None if n % 2 == 0 else NoNode for n in range(count)]
    assert (expected, []) == (
        [None if o is None else type(o) for o in got],
        await store.get_children("/many"),
    )


async def test_paused_server_leaves_every_item_unknown(zk: ZooKeeperServer) -> None:
    """With the server paused no answer comes: every item is StoreUnavailable, none deleted."""
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=5.0, request_timeout=1.0
    ) as store:
        await store.create("/p1")
        await store.create("/p2")
        zk.pause()
        try:
            got = await store.delete_many([("/p1", 0), ("/p2", 0), ("/p3", 0)])
        finally:
            zk.resume()
    assert kinds(got) == [
        ("StoreUnavailable", "/p1"),
        ("StoreUnavailable", "/p2"),
        ("StoreUnavailable", "/p3"),
    ]


async def test_refused_multi_is_unsupported_and_applies_nothing(
    proxied: ZkMetadataStore, proxy: ZooKeeperFaultProxy
) -> None:
    """A server that does not implement multi: every item is Unsupported, nothing is deleted,
    and the store works again on its next request (the server closed the connection)."""
    await proxied.create("/r1")
    await proxied.create("/r2")
    proxy.refused.add(MULTI)
    got = await proxied.delete_many([("/r1", 0), ("/r2", 0)])
    await proxied.delete("/r1", version=0)
    assert ([Unsupported, Unsupported], ["/r2"]) == (
        [type(o) for o in got],
        await existing(proxied, ["/r1", "/r2"]),
    )


def test_reply_of_a_failed_multi_names_the_failing_delete() -> None:
    """A reply as ZooKeeper writes it for a failed multi (rolled back 0, the cause, then
    RUNTIMEINCONSISTENCY) gives the position and code of the cause."""
    header = struct.Struct("!i?i")
    raw = b"".join(
        [
            header.pack(-1, False, 0) + struct.pack("!i", 0),
            header.pack(-1, False, -101) + struct.pack("!i", -101),
            header.pack(-1, False, -2) + struct.pack("!i", -2),
            header.pack(-1, True, -1),
        ]
    )
    assert MultiDeleteResponse.deserialize(raw).failure(3) == (1, -101)


@pytest.mark.parametrize(
    ("raw", "sent", "problem"),
    [
        (b"\x00\x00\x00\x02\x00", 1, "undecodable"),
        (struct.pack("!i?i", -1, True, -1), 1, "0 results for 1 deletes"),
        (
            struct.pack("!i?i", 2, False, 0)  # applied...
            + struct.pack("!i?ii", -1, False, -1, -1)  # ...beside a failure
            + struct.pack("!i?i", -1, True, -1),
            2,
            "inconsistent",
        ),
    ],
    ids=["truncated", "wrong-count", "applied-and-failed"],
)
def test_unclear_reply_is_an_error_not_a_verdict(raw: bytes, sent: int, problem: str) -> None:
    """A reply that does not say what happened is never read as "deleted": decoding does not
    raise (that would abort aiozk's connection), and asking for the outcome does."""
    response = MultiDeleteResponse.deserialize(raw)
    with pytest.raises(ValueError, match=problem):
        response.failure(sent)
