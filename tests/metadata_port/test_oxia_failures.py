"""The Oxia adapter when things go wrong: the server gone, a session expired, notification
streams cut. Unknown is never absent, and no watch misses a change silently."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from services.marker.follower.leadership import Leadership
from services.metadata.errors import NoNode, StoreUnavailable, VersionConflict
from services.metadata.oxia import OxiaMetadataStore
from services.metadata.store import WatchEvent

from ._proxy import FreezingProxy
from .conftest import eventually

REQUEST_TIMEOUT = 2.0
SESSION_TIMEOUT = 2.0  # the shortest Oxia accepts: expiry is noticed within seconds
WAIT = 15.0  # bounds a hung test only


@pytest.fixture(params=[1, 3], ids=["1-shard", "3-shards"])
def server(request: pytest.FixtureRequest) -> Iterator[OxiaServer]:
    with running_in_thread(shards=request.param) as running:
        yield running


@pytest.fixture
async def store(server: OxiaServer) -> AsyncIterator[OxiaMetadataStore]:
    async with OxiaMetadataStore.connect(
        server.address, session_timeout=SESSION_TIMEOUT, request_timeout=REQUEST_TIMEOUT
    ) as opened:
        yield opened


async def test_no_server_to_connect_to_is_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(StoreUnavailable):
        async with OxiaMetadataStore.connect(address, session_timeout=2.0, request_timeout=0.5):
            pass


@pytest.mark.parametrize("session_timeout", [1.0, 301.0])
async def test_a_session_timeout_oxia_refuses_is_refused_before_connecting(session_timeout):
    with pytest.raises(ValueError, match="session timeouts"):
        async with OxiaMetadataStore.connect(
            "127.0.0.1:1", session_timeout=session_timeout, request_timeout=1.0
        ):
            pass


async def test_a_stopped_server_is_unavailable_never_absent(
    store: OxiaMetadataStore, server: OxiaServer
):
    created = await store.create("/s/k", b"v", make_parents=True)
    _data, data_watch = await store.get_and_watch("/s/k")
    _names, child_watch = await store.get_children_and_watch("/s")
    lost = store.connection_lost()
    await asyncio.to_thread(server.stop_from_thread)

    assert await asyncio.wait_for(data_watch, WAIT) is WatchEvent.CONNECTION_LOST
    assert await asyncio.wait_for(child_watch, WAIT) is WatchEvent.CONNECTION_LOST
    await asyncio.wait_for(lost, WAIT)
    assert not store.connected
    for call in (
        store.get("/s/k"),
        store.get("/s/absent"),
        store.exists("/s/absent"),
        store.get_children("/s"),
        store.set("/s/k", b"w", version=created.version),
        store.create("/s/new", b""),
        store.delete("/s/k", version=created.version),
        store.watch("/s/k"),
    ):
        with pytest.raises(StoreUnavailable):
            await call
    many = await store.get_many(["/s/k", "/s/absent"])
    assert all(isinstance(result, StoreUnavailable) for result in many)
    deleted = await store.delete_many([("/s/k", created.version)])
    assert all(isinstance(outcome, StoreUnavailable) for outcome in deleted)


async def test_an_expired_session_loses_its_ephemerals_and_the_leadership(
    store: OxiaMetadataStore, server: OxiaServer
):
    # Leadership is typed for the ZooKeeper store; it uses only the port.
    leadership = Leadership(cast(Any, store), "marker-1", path="/lead/leader")
    assert await leadership.acquire(asyncio.Event())
    assert await leadership.holds()
    before = store.session_id
    lost = store.connection_lost()
    _stat, fired = await store.watch("/lead/leader")

    server.expire_sessions()
    await asyncio.wait_for(lost, WAIT)
    assert await asyncio.wait_for(fired, WAIT) in (WatchEvent.DELETED, WatchEvent.CONNECTION_LOST)
    assert store.session_id != before

    async def gone() -> bool:
        return await store.exists("/lead/leader") is None

    await eventually(gone, "the leader record deleted with its session")
    assert not await leadership.holds()
    assert await leadership.acquire(asyncio.Event())  # a new session takes it again
    assert await leadership.holds()


async def test_an_ephemeral_create_on_an_expired_session_is_unavailable_then_recovers(
    store: OxiaMetadataStore, server: OxiaServer
):
    await store.create("/x", b"")
    await store.create("/x/first", b"", ephemeral=True)
    before = store.session_id
    server.expire_sessions()

    async def recreated() -> bool:
        try:
            await store.create("/x/second", b"", ephemeral=True)
        except StoreUnavailable:
            return False
        return True

    await eventually(recreated, "an ephemeral create on a new session")

    async def replaced() -> bool:
        # With several shards the new record may be on a shard that had no session yet; the
        # expired one is noticed by its keepalive.
        return store.session_id != before

    await eventually(replaced, "the store's session replaced")
    stat = await store.exists("/x/second")
    assert stat is not None
    assert stat.ephemeral_owner == store.session_id


async def test_cut_notification_streams_fire_every_watch_then_watches_work_again(
    store: OxiaMetadataStore, server: OxiaServer
):
    keys = [f"/n/k{i}" for i in range(6)]  # spread over the shards
    for key in keys:
        await store.create(key, b"", make_parents=True)
    watches = [(await store.get_and_watch(key))[1] for key in keys]
    lost = store.connection_lost()
    server.drop_notification_streams()
    for fired in watches:
        assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CONNECTION_LOST
    await asyncio.wait_for(lost, WAIT)

    await asyncio.wait_for(store.wait_connected(), WAIT)
    # After the reconnect every shard delivers again, busy or idle.
    for key in keys:
        read, fired = await store.get_and_watch(key)
        await store.set(key, b"changed", version=read.version)
        assert await asyncio.wait_for(fired, WAIT) is WatchEvent.CHANGED


async def test_a_change_during_a_cut_is_never_lost_silently(
    store: OxiaMetadataStore, server: OxiaServer
):
    created = await store.create("/during", b"")
    _read, fired = await store.get_and_watch("/during")
    server.drop_notification_streams()
    await store.set("/during", b"x", version=created.version)
    assert await asyncio.wait_for(fired, WAIT) in (WatchEvent.CHANGED, WatchEvent.CONNECTION_LOST)


async def test_the_port_errors_are_typed(store: OxiaMetadataStore):
    with pytest.raises(NoNode):
        await store.get("/nothing")


@pytest.fixture
def frozen_network() -> Iterator[tuple[FreezingProxy, str]]:
    """A server reached only through a proxy on another loopback address (the shards'
    leaders are advertised there too)."""
    with running_in_thread(shards=3, advertised_host="127.0.0.2") as running:
        proxy = FreezingProxy("127.0.0.2", "127.0.0.1", running.port)
        proxy.start()
        try:
            yield proxy, running.address
        finally:
            proxy.thaw()
            proxy.stop()


async def test_an_unanswered_write_is_unavailable_and_never_resent(
    frozen_network: tuple[FreezingProxy, str],
):
    proxy, address = frozen_network
    async with OxiaMetadataStore.connect(
        address, session_timeout=10.0, request_timeout=1.0
    ) as store:
        created = await store.create("/held", b"0")
        proxy.freeze()
        with pytest.raises(StoreUnavailable):
            await store.set("/held", b"1", version=created.version)
        with pytest.raises(StoreUnavailable):
            await store.get("/held")
        proxy.thaw()

        async def answered() -> bool:
            try:
                await store.get("/held")
            except StoreUnavailable:
                return False
            return True

        await eventually(answered, "reads answered again")
        # The held write arrived once, late; the adapter sent it once.
        now = await store.get("/held")
        assert now.data == b"1"
        assert now.version > created.version
        with pytest.raises(VersionConflict):
            await store.set("/held", b"2", version=created.version)


async def test_delete_many_whose_children_check_is_unanswered_is_unknown_and_deletes_nothing(
    frozen_network: tuple[FreezingProxy, str],
):
    """The batched children check held by the network: every item is `StoreUnavailable`
    (never deleted, never absent), and no delete follows once the check's answer arrives."""
    proxy, address = frozen_network
    async with OxiaMetadataStore.connect(
        address, session_timeout=10.0, request_timeout=1.0
    ) as store:
        paths = ["/batch/a", "/batch/b", "/other/c"]
        items = [
            (path, (await store.create(path, b"", make_parents=True)).version) for path in paths
        ]
        proxy.freeze()
        outcomes = await store.delete_many(items)
        assert all(isinstance(outcome, StoreUnavailable) for outcome in outcomes)
        proxy.thaw()

        async def answered() -> bool:
            try:
                return all([await store.exists(path) is not None for path in paths])
            except StoreUnavailable:
                return False

        await eventually(answered, "every key read again, still there")
        assert [await store.get_children(p) for p in ("/batch", "/other")] == [["a", "b"], ["c"]]


async def test_a_restarted_server_is_served_again_and_the_store_still_closes(
    store: OxiaMetadataStore, server: OxiaServer
):
    """The server halts and comes back on its address: the store reads and writes again,
    and closing it returns (the client's assignments thread, which waited on its start
    barrier after each new answer, used to hang its `close()` for ever)."""
    created = await store.create("/r/k", b"v", make_parents=True)
    await asyncio.to_thread(server.halt_from_thread)
    with pytest.raises(StoreUnavailable):
        await store.get("/r/k")
    await asyncio.to_thread(server.restart_from_thread)

    async def served() -> bool:
        try:
            return (await store.get("/r/k")).data == b"v"
        except StoreUnavailable:
            return False

    await eventually(served, "the record read again", WAIT)
    assert await store.set("/r/k", b"w", version=created.version) > created.version
    discovery = cast(Any, store)._client._service_discovery
    await asyncio.wait_for(asyncio.to_thread(discovery.close), WAIT)
