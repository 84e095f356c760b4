"""`MigrationGuardedStore` on the real ZooKeeper, with the migration record written as Pulsar's
`MigrationCoordinator` writes it (`pulsar_migration.py`): writes pause in PREPARATION and
COPYING, everything stops after COMPLETED, FAILED and no migration pass, and an unknown
state pauses writes. The guard's session goes through a fault proxy so that it can be cut."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from devstack.zk_faults import ZooKeeperFaultProxy
from services.metadata import MetadataStore, Versioned, ZkMetadataStore
from services.metadata.errors import CorruptMetadata, StoreUnavailable
from services.metadata.migration import (
    NO_MIGRATION,
    MigrationGuardedStore,
    MigrationPhase,
    MigrationState,
    Reading,
    Unknown,
    decode_state,
)
from tests.metadata.pulsar_migration import (
    TARGET_URL,
    PulsarMigrationCoordinator,
    pulsar_state_json,
)

LEDGER = "/ledgers/00/0000/L0007"
MANAGED_LEDGER = "/managed-ledgers/t/ns/persistent/topic"


@pytest.fixture
async def guarded(
    proxy: ZooKeeperFaultProxy,
) -> AsyncIterator[MigrationGuardedStore[ZkMetadataStore]]:
    async with (
        ZkMetadataStore.connect(proxy.address, session_timeout=5, request_timeout=2) as session,
        MigrationGuardedStore(session, retry_delay=0.05) as guard,
    ):
        yield guard


@pytest.fixture
def coordinator(store: ZkMetadataStore) -> PulsarMigrationCoordinator:
    """Pulsar's coordinator, on its own session to the source ZooKeeper."""
    return PulsarMigrationCoordinator(store)


async def reach(
    guard: MigrationGuardedStore[ZkMetadataStore], want: Callable[[Reading], bool]
) -> Reading:
    async with asyncio.timeout(10):
        return await guard.follower.wait_for(want)


def phase(p: MigrationPhase) -> Callable[[Reading], bool]:
    return lambda r: r == MigrationState(p, TARGET_URL)


def unknown_because(problem: str) -> Callable[[Reading], bool]:
    return lambda r: isinstance(r, Unknown) and problem in r.problem


async def seed(store: MetadataStore) -> dict[str, Versioned]:
    """A ledger znode and a managed-ledger znode, as they are before any write of ours."""
    await store.create(LEDGER, b"ledger-metadata", make_parents=True)
    await store.create(MANAGED_LEDGER, b"managed-ledger-info", make_parents=True)
    return {p: await store.get(p) for p in (LEDGER, MANAGED_LEDGER)}


async def refused(call: object) -> str:
    """The reason of the `StoreUnavailable` the awaitable `call` raised."""
    with pytest.raises(StoreUnavailable) as caught:
        await call  # type: ignore[misc]
    return caught.value.reason


def test_the_guard_satisfies_the_port(store: ZkMetadataStore) -> None:
    """The wrapper is a `MetadataStore` (checked by mypy through this assignment)."""
    port: MetadataStore = MigrationGuardedStore(store)
    assert port.connected == store.connected


def test_decodes_pulsars_json() -> None:
    """Every `MigrationPhase` Pulsar writes decodes; unknown fields are ignored as Pulsar's
    mapper ignores them; a missing or unknown phase and non-JSON are corrupt, not "none"."""
    got = [decode_state(pulsar_state_json(p)) for p in MigrationPhase]
    assert got == [MigrationState(p, TARGET_URL) for p in MigrationPhase]
    assert decode_state(b'{"phase":"COPYING","targetUrl":null,"extra":1}') == MigrationState(
        MigrationPhase.COPYING
    )
    for bad in (b"", b"nope", b"[]", b'{"targetUrl":"oxia://x"}', b'{"phase":"PAUSED"}'):
        with pytest.raises(CorruptMetadata):
            decode_state(bad)


async def test_no_migration_passes_writes(guarded: MigrationGuardedStore[ZkMetadataStore]) -> None:
    """Without a migration record every write goes through."""
    assert guarded.reading == NO_MIGRATION
    before = await seed(guarded)
    new_version = await guarded.set(MANAGED_LEDGER, b"marked", version=0)
    await guarded.delete(LEDGER, version=before[LEDGER].version)
    assert (new_version, await guarded.exists(LEDGER)) == (1, None)


async def test_copying_refuses_every_write_and_changes_nothing(
    guarded: MigrationGuardedStore[ZkMetadataStore],
    store: ZkMetadataStore,
    coordinator: PulsarMigrationCoordinator,
) -> None:
    """During COPYING a conditional delete, a compare-and-set, a create, a sequential create
    and a batch of deletes are refused with `StoreUnavailable` naming the phase, and the
    store is exactly as before; reads go on."""
    before = await seed(store)
    await coordinator.set_initial_migration_phase()
    await coordinator.update_phase(MigrationPhase.COPYING)
    await reach(guarded, phase(MigrationPhase.COPYING))

    reasons = [
        await refused(guarded.delete(LEDGER, version=before[LEDGER].version)),
        await refused(guarded.set(MANAGED_LEDGER, b"marked", version=0)),
        await refused(guarded.create("/tombstone/new", b"x", make_parents=True)),
        await refused(guarded.create_sequential("/tombstone/seq-", make_parents=True)),
    ]
    batch = await guarded.delete_many([(LEDGER, before[LEDGER].version)])

    assert all("phase COPYING" in reason for reason in reasons), reasons
    assert [type(outcome) for outcome in batch] == [StoreUnavailable]
    assert {p: await store.get(p) for p in before} == before
    assert await store.exists("/tombstone") is None
    assert (await guarded.get(LEDGER)).data == b"ledger-metadata"
    assert await guarded.get_children("/managed-ledgers/t/ns/persistent") == ["topic"]
    assert [type(got) for got in await guarded.get_many([LEDGER, MANAGED_LEDGER])] == [
        Versioned,
        Versioned,
    ]


async def test_preparation_refuses_writes(
    guarded: MigrationGuardedStore[ZkMetadataStore],
    store: ZkMetadataStore,
    coordinator: PulsarMigrationCoordinator,
) -> None:
    """PREPARATION pauses writes already (`DualMetadataStore.put` refuses them too)."""
    before = await seed(store)
    await coordinator.set_initial_migration_phase()
    await reach(guarded, phase(MigrationPhase.PREPARATION))
    reason = await refused(guarded.delete(LEDGER, version=before[LEDGER].version))
    assert "phase PREPARATION" in reason
    assert await store.get(LEDGER) == before[LEDGER]


async def test_failed_lets_writes_through_again(
    guarded: MigrationGuardedStore[ZkMetadataStore],
    store: ZkMetadataStore,
    coordinator: PulsarMigrationCoordinator,
) -> None:
    """A state written while the guard runs takes effect without a restart: COPYING pauses
    writes, FAILED (Pulsar back on ZooKeeper) lets the same write through."""
    before = await seed(store)
    await coordinator.set_initial_migration_phase()
    await coordinator.update_phase(MigrationPhase.COPYING)
    await reach(guarded, phase(MigrationPhase.COPYING))
    await refused(guarded.set(MANAGED_LEDGER, b"marked", version=0))

    await coordinator.update_phase(MigrationPhase.FAILED)
    await reach(guarded, phase(MigrationPhase.FAILED))
    assert await guarded.set(MANAGED_LEDGER, b"marked", version=0) == 1
    await guarded.delete(LEDGER, version=before[LEDGER].version)
    assert await store.exists(LEDGER) is None


async def test_completed_refuses_reads_and_writes(
    guarded: MigrationGuardedStore[ZkMetadataStore],
    store: ZkMetadataStore,
    coordinator: PulsarMigrationCoordinator,
) -> None:
    """After COMPLETED the source is a stale copy: reads, watches and writes are all refused,
    and the reason tells the operator which settings to point at Oxia."""
    await seed(store)
    await coordinator.set_initial_migration_phase()
    await coordinator.update_phase(MigrationPhase.COPYING)
    await coordinator.update_phase(MigrationPhase.COMPLETED)
    await reach(guarded, phase(MigrationPhase.COMPLETED))

    reasons = [
        await refused(guarded.get(LEDGER)),
        await refused(guarded.exists(LEDGER)),
        await refused(guarded.get_children("/managed-ledgers")),
        await refused(guarded.get_and_watch(MANAGED_LEDGER)),
        await refused(guarded.watch(MANAGED_LEDGER)),
        await refused(guarded.get_children_and_watch("/managed-ledgers")),
        await refused(guarded.add_recursive_watch("/managed-ledgers", lambda _k, _p: None)),
        await refused(guarded.delete(LEDGER, version=0)),
        await refused(guarded.set(MANAGED_LEDGER, b"x", version=0)),
    ]
    many = await guarded.get_many([LEDGER])
    assert all(
        "TOMBSTONE_METADATA_STORE_URL" in r and "TOMBSTONE_BOOKKEEPER_METADATA_URL" in r
        for r in reasons
    ), reasons
    assert TARGET_URL in reasons[0]
    assert [type(got) for got in many] == [StoreUnavailable]
    assert (await store.get(LEDGER)).version == 0


async def test_undecodable_state_refuses_writes_until_fixed(
    guarded: MigrationGuardedStore[ZkMetadataStore],
    store: ZkMetadataStore,
    coordinator: PulsarMigrationCoordinator,
) -> None:
    """A record that cannot be decoded (not JSON, or a phase this code does not know) is not
    "no migration": writes are refused, reads go on, until a decodable state is written."""
    before = await seed(store)
    cases = {
        b"\x00garbage": "not JSON",
        b'{"phase":"ROLLING_BACK","targetUrl":"oxia://x"}': "unknown migration phase",
    }
    for raw, problem in cases.items():
        await coordinator.write_raw(raw)
        await reach(guarded, unknown_because(problem))
        reason = await refused(guarded.delete(LEDGER, version=before[LEDGER].version))
        assert "migration state unknown" in reason
        assert (await guarded.get(LEDGER)).version == before[LEDGER].version
    await coordinator.update_phase(MigrationPhase.FAILED)
    await reach(guarded, phase(MigrationPhase.FAILED))
    await guarded.delete(LEDGER, version=before[LEDGER].version)


async def test_state_unknown_before_the_first_read_refuses_writes(
    store: ZkMetadataStore,
) -> None:
    """A guard not started (or whose first read failed) knows nothing: writes are refused."""
    guard = MigrationGuardedStore(store)
    assert isinstance(guard.reading, Unknown)
    await refused(guard.create("/tombstone/x", make_parents=True))
    assert await store.exists("/tombstone") is None


async def test_unreachable_store_then_a_change_missed_while_cut(
    guarded: MigrationGuardedStore[ZkMetadataStore],
    store: ZkMetadataStore,
    coordinator: PulsarMigrationCoordinator,
    proxy: ZooKeeperFaultProxy,
) -> None:
    """A connection loss makes the state unknown (writes refused) until it is read again; a
    phase written while the guard was cut off is the one in force once it reconnects."""
    await seed(store)
    assert guarded.reading == NO_MIGRATION
    proxy.cut(seconds=1.0)
    await reach(guarded, lambda r: isinstance(r, Unknown))
    await coordinator.set_initial_migration_phase()
    await coordinator.update_phase(MigrationPhase.COPYING)
    await refused(guarded.set(MANAGED_LEDGER, b"marked", version=0))
    await reach(guarded, phase(MigrationPhase.COPYING))
    assert "phase COPYING" in await refused(guarded.set(MANAGED_LEDGER, b"marked", version=0))


async def test_a_closed_guard_refuses_writes(store: ZkMetadataStore) -> None:
    """Once the guard stops following the record (closed, or its loop ended) what it last
    read is stale: writes are refused again."""
    async with MigrationGuardedStore(store) as guard:
        assert guard.reading == NO_MIGRATION
        await guard.create("/tombstone/a", make_parents=True)
    after: Reading = guard.follower.reading
    assert isinstance(after, Unknown)
    await refused(guard.create("/tombstone/b"))
    assert await store.get_children("/tombstone") == ["a"]
