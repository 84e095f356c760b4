"""Tombstone as a PIP-454 migration participant, on the real ZooKeeper, against a coordinator
that waits for the participants as Pulsar's `MigrationCoordinator` does
(`pulsar_migration.py`): the guard registers when no migration runs, the coordinator waits
for it, it leaves once its writes in flight have ended, and no write of ours lands after."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.core.config import ZooKeeperConfig
from services.core.shared_clusters import parse_store_url
from services.metadata import NoNode, ZkMetadataStore
from services.metadata.acl import ADMIN, ALL, READ, AclEntry
from services.metadata.connect import connect_store, open_stores
from services.metadata.errors import StoreUnavailable
from services.metadata.migration import (
    PARTICIPANTS_PATH,
    MigrationGuardedStore,
    MigrationPhase,
    MigrationState,
    Reading,
)
from tests.helpers import assert_eventually
from tests.metadata.pulsar_migration import TARGET_URL, PulsarMigrationCoordinator

KEY = "/tombstone/probe"
WAIT = 20.0  # bounds a hung test only


@contextlib.asynccontextmanager
async def guard_on(
    address: str, *, chroot: str | None = None, session_timeout: float = 5.0
) -> AsyncIterator[MigrationGuardedStore[ZkMetadataStore]]:
    async with (
        ZkMetadataStore.connect(
            address, chroot=chroot, session_timeout=session_timeout, request_timeout=2
        ) as session,
        MigrationGuardedStore(session, retry_delay=0.05) as guard,
    ):
        yield guard


async def participants(store: ZkMetadataStore, root: str = "") -> dict[str, int]:
    """Participant znode name -> owning session."""
    try:
        names = await store.get_children(f"{root}{PARTICIPANTS_PATH}")
    except NoNode:
        return {}
    owners = {}
    for name in names:
        stat = await store.exists(f"{root}{PARTICIPANTS_PATH}/{name}")
        if stat is not None:
            owners[name] = stat.ephemeral_owner
    return owners


async def reach(guard: MigrationGuardedStore[ZkMetadataStore], phase: MigrationPhase) -> Reading:
    async with asyncio.timeout(WAIT):
        return await guard.follower.wait_for(lambda r: r == MigrationState(phase, TARGET_URL))


async def pulsar_registered(store: ZkMetadataStore, root: str = "") -> None:
    """The participants' parent under `root`, as a broker of a PIP-454 release leaves it when
    it registers (`DualMetadataStore.registerAsParticipant`, parents created): Tombstone
    registers only under an existing one, never creating it."""
    await store.create(f"{root}{PARTICIPANTS_PATH}", make_parents=True)


async def test_registers_at_start_in_the_brokers_chroot(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """One ephemeral sequential `id-` znode of the guard's session, under the same root as the
    migration record it follows."""
    await pulsar_registered(store, "/cluster-a")
    async with guard_on(zk.address, chroot="/cluster-a") as guard:
        assert await participants(store) == {}
        found = await participants(store, "/cluster-a")
        assert list(found.values()) == [guard.session_id]
        (name,) = found
        assert name.startswith("id-")
        assert guard.participant.registered == f"{PARTICIPANTS_PATH}/{name}"
    # Gone with the session.
    assert await participants(store, "/cluster-a") == {}


async def test_a_read_only_session_follows_the_record_without_registering(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """A session Tombstone only reads (a neighbour cluster's store, the configuration store)
    writes no participant znode there: that store is not ours to write, and its cluster's
    migration must not wait on us. It still follows the record (its reads stop after
    COMPLETED)."""
    await pulsar_registered(store, "/neighbour")
    zk_config = ZooKeeperConfig.from_env({"TOMBSTONE_METADATA_STORE_URL": f"zk:{zk.address}"})
    neighbour = parse_store_url(f"zk:{zk.address}/neighbour")
    async with connect_store(zk_config, neighbour, read_only=True) as session:
        assert isinstance(session, MigrationGuardedStore)
        assert session.follower.reading is not None
        await asyncio.sleep(0.5)
        assert await participants(store, "/neighbour") == {}
    # The same store as one Tombstone writes: registered.
    async with connect_store(zk_config, neighbour) as session:
        assert isinstance(session, MigrationGuardedStore)

        async def registered() -> None:
            assert list((await participants(store, "/neighbour")).values()) == [session.session_id]

        await assert_eventually(registered)


async def test_no_participants_parent_no_registration_and_nothing_created(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """Where no Pulsar participant has registered (a Pulsar before PIP-454), the guard creates
    nothing: on a secured ZooKeeper a parent made by Tombstone would carry Tombstone's ACL and
    no broker could register under it. Writes go on; once a broker has made the parent, the
    guard registers under it."""
    async with guard_on(zk.address) as guard:
        await asyncio.sleep(0.3)
        assert (await store.exists("/pulsar"), guard.participant.registered) == (None, None)
        await guard.create(KEY, b"v", make_parents=True)
        await pulsar_registered(store)

        async def registered() -> None:
            assert list((await participants(store)).values()) == [guard.session_id]

        await assert_eventually(registered)


async def test_coordinator_waits_for_the_write_in_flight_and_none_lands_after(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """A write in flight when PREPARATION arrives keeps the participant registered, so the
    coordinator waits for it; the participant leaves once it ended, and what the copy reads
    then is what stays: no write of ours lands after.

    The write in flight is held open with `participant.writing()` and then made on the inner
    session: that is a guarded write whose request reaches ZooKeeper late (after
    PREPARATION), as one that passed the guard just before the notification arrived does."""
    await pulsar_registered(store)
    coordinator = PulsarMigrationCoordinator(store)
    await store.create(KEY, b"v0", make_parents=True)
    async with guard_on(zk.address) as guard:
        registered = guard.participant.registered
        assert registered is not None
        with capture_logs() as logs:
            with guard.participant.writing():
                await coordinator.set_initial_migration_phase()
                waiting = asyncio.create_task(
                    coordinator.wait_for_preparation(limit=WAIT, max_delay=0.2)
                )
                await reach(guard, MigrationPhase.PREPARATION)
                await asyncio.sleep(0.5)  # the coordinator polls meanwhile
                assert not waiting.done()
                assert await store.exists(registered) is not None
                late = await guard.inner.set(KEY, b"late", version=0)
            async with asyncio.timeout(WAIT):
                assert await waiting == []
        assert coordinator.waited_for == {registered.rsplit("/", 1)[1]}
        await coordinator.update_phase(MigrationPhase.COPYING)
        copied = await coordinator.copy([KEY])
        node = copied[KEY]
        assert node is not None
        assert (node.data, node.version) == (b"late", late)
        with pytest.raises(StoreUnavailable):
            await guard.set(KEY, b"after", version=late)
        await reach(guard, MigrationPhase.COPYING)
        with pytest.raises(StoreUnavailable):
            await guard.set(KEY, b"after", version=late)
        assert (await store.get(KEY)).data == b"late"
        assert guard.participant.in_flight == 0
    events = [entry["event"] for entry in logs]
    assert "metadata_migration_writes_in_flight" in events
    assert "metadata_migration_participant_left" in events


async def test_writes_racing_preparation_all_land_before_the_copy(
    zk: ZooKeeperServer, store: ZkMetadataStore, proxy: ZooKeeperFaultProxy
) -> None:
    """Guarded writes in a loop while the coordinator starts, with the guard's replies (its
    PREPARATION notification among them) held up, so that one may pass the guard after
    PREPARATION was written. The coordinator waits for the guard's participant, every write
    that was made is in what the copy reads, and nothing changes after."""
    await pulsar_registered(store)
    coordinator = PulsarMigrationCoordinator(store)
    await store.create(KEY, b"0", make_parents=True)
    async with guard_on(proxy.address) as guard:
        made: list[int] = []

        async def writer() -> None:
            version = 0
            while True:
                try:
                    version = await guard.set(KEY, b"%d" % (len(made) + 1), version=version)
                except StoreUnavailable:
                    return
                made.append(version)
                await asyncio.sleep(0.02)

        writing = asyncio.create_task(writer())
        await asyncio.sleep(0.2)
        proxy.slow(0.3, seconds=2.0)
        await coordinator.set_initial_migration_phase()
        async with asyncio.timeout(WAIT):
            assert await coordinator.wait_for_preparation(limit=WAIT, max_delay=0.2) == []
        copied = (await coordinator.copy([KEY]))[KEY]
        await coordinator.update_phase(MigrationPhase.COPYING)
        async with asyncio.timeout(WAIT):
            await writing
        await reach(guard, MigrationPhase.COPYING)
        assert copied is not None
        assert made
        assert copied.version == made[-1]
        assert (await store.get(KEY)).version == copied.version
        assert coordinator.waited_for  # it did wait for us


async def test_registers_again_after_its_session_expired(
    store: ZkMetadataStore, proxy: ZooKeeperFaultProxy
) -> None:
    await pulsar_registered(store)
    async with guard_on(proxy.address, session_timeout=2.0) as guard:
        first = guard.session_id
        assert list((await participants(store)).values()) == [first]
        proxy.cut(4.0)

        async def registered_on_a_new_session() -> None:
            owners = list((await participants(store)).values())
            assert guard.session_id not in (first, None)
            assert owners == [guard.session_id]
            assert guard.participant.registered is not None

        await assert_eventually(registered_on_a_new_session, timeout=30)


async def test_never_registers_while_a_migration_runs(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """Started in PREPARATION: no znode (the coordinator would only wait for nothing); the
    same after COPYING; once the migration FAILED it registers, for the next attempt."""
    await pulsar_registered(store)
    coordinator = PulsarMigrationCoordinator(store)
    await coordinator.set_initial_migration_phase()
    async with guard_on(zk.address) as guard:
        assert await participants(store) == {}
        await coordinator.update_phase(MigrationPhase.COPYING)
        await reach(guard, MigrationPhase.COPYING)
        await asyncio.sleep(0.2)
        assert await participants(store) == {}
        await coordinator.update_phase(MigrationPhase.FAILED)

        async def registered() -> None:
            assert list((await participants(store)).values()) == [guard.session_id]

        await assert_eventually(registered, timeout=WAIT)


async def test_leaves_in_preparation_and_registers_again_after_failed(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """With no write in flight it leaves at once; a FAILED migration brings it back (Pulsar's
    own participants do not come back until restarted)."""
    await pulsar_registered(store)
    coordinator = PulsarMigrationCoordinator(store)
    async with guard_on(zk.address) as guard:
        await coordinator.set_initial_migration_phase()
        async with asyncio.timeout(WAIT):
            assert await coordinator.wait_for_preparation(limit=WAIT, max_delay=0.2) == []
        assert guard.participant.registered is None
        await coordinator.update_phase(MigrationPhase.FAILED)

        async def registered() -> None:
            assert list((await participants(store)).values()) == [guard.session_id]

        await assert_eventually(registered, timeout=WAIT)
        await guard.create(KEY, b"after FAILED", make_parents=True)


async def test_a_refused_registration_does_not_stop_writes_and_is_retried(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """The participants' znode refuses creates (an ACL): the guard starts, logs the refusal,
    writes go on, and it registers as soon as the ACL allows."""
    await store.create(PARTICIPANTS_PATH, b"", make_parents=True)
    await store.set_acl(PARTICIPANTS_PATH, [AclEntry("world", "anyone", READ | ADMIN)], version=0)
    with capture_logs() as logs:
        async with guard_on(zk.address) as guard:
            assert guard.participant.registered is None
            await guard.create(KEY, b"written", make_parents=True)
            assert (await store.get(KEY)).data == b"written"
            await store.set_acl(PARTICIPANTS_PATH, [AclEntry("world", "anyone", ALL)], version=1)

            async def registered() -> None:
                assert list((await participants(store)).values()) == [guard.session_id]

            await assert_eventually(registered, timeout=WAIT)
    assert "metadata_migration_participant_failed" in [entry["event"] for entry in logs]


async def test_bookkeeper_s_own_chroot_shares_pulsar_s_registration(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    """BookKeeper's metadata in a chroot of its own: one participant, in Pulsar's chroot beside
    the record, which counts the writes of both sessions."""
    config = ZooKeeperConfig.from_env(
        {
            "TOMBSTONE_METADATA_STORE_URL": f"zk:{zk.address}/pulsar",
            "TOMBSTONE_BOOKKEEPER_METADATA_URL": f"metadata-store:zk:{zk.address}/bk",
        }
    )
    await pulsar_registered(store, "/pulsar")
    await store.create("/bk/ledgers", make_parents=True)
    async with contextlib.AsyncExitStack() as stack:
        pulsar, bookkeeper = await open_stores(stack, config)
        assert isinstance(pulsar, MigrationGuardedStore)
        assert isinstance(bookkeeper, MigrationGuardedStore)
        assert bookkeeper.participant is pulsar.participant
        assert list((await participants(store, "/pulsar")).values()) == [pulsar.session_id]
        assert await participants(store, "/bk") == {}
        # A write on BookKeeper's session is counted by Pulsar's participant while it is sent.
        writing = asyncio.create_task(bookkeeper.create("/ledgers/L1", b"x"))
        await asyncio.sleep(0)  # the task runs up to its request, and waits for the answer
        assert pulsar.participant.in_flight == 1
        await writing
        assert pulsar.participant.in_flight == 0
