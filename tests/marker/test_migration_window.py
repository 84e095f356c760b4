"""The marker in PIP-454's migration window, served over gRPC on the store its settings name
(the deleter's pause is in tests/deleter/test_migration_pause.py, the guard's own rules in
tests/metadata/test_migration_guard.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest
from grpc import aio

from devstack.pulsar import PulsarBrokerProcess
from services.metadata.migration import MigrationGuardedStore, MigrationPhase, MigrationState
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.marker.builders import ML_NAME, ML_PATH, ledger, ml_bytes, ml_ledger_ids
from tests.marker.live import create_system_topic, live_marker
from tests.metadata.pulsar_migration import TARGET_URL, PulsarMigrationCoordinator
from tests.store_kinds import StoreKind
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd


def _request(*ids: int) -> _mk.MarkLedgersRequest:
    return _mk.MarkLedgersRequest(
        component=_pd.MANAGED_LEDGER, managed_ledger_name=ML_NAME, ledger_ids=ids
    )


async def _refused(stub: object, request: _mk.MarkLedgersRequest) -> grpc.StatusCode:
    with pytest.raises(aio.AioRpcError) as refused:
        await stub.MarkLedgers(request)  # type: ignore[attr-defined]
    return refused.value.code()


async def test_copying_pauses_marking_and_completed_refuses_it(
    store_kind: StoreKind, broker: PulsarBrokerProcess
) -> None:
    """On ZooKeeper, Pulsar's migration record (written as `MigrationCoordinator` writes it)
    governs the marker: while it says COPYING a Mark is UNAVAILABLE and unlinks nothing; once
    FAILED the same Mark goes through; and a store whose migration COMPLETED is not read
    again (UNAVAILABLE), since Pulsar's metadata now lives in Oxia.

    On Oxia, Pulsar keeps no migration record (PIP-454 moves ZooKeeper to Oxia, never the
    other way), so the marker is never paused there: Mark goes through. What protects an
    Oxia deployment is the other end of the same window: services still configured on the
    migrated ZooKeeper refuse to read it once the record says COMPLETED, so none works on a
    stale copy while Oxia has the metadata, and they act again only when their settings
    name the Oxia store."""
    create_system_topic(broker)
    async with live_marker(store_kind, broker) as (_, store, stub):
        await store.create(ML_PATH, ml_bytes(ledger(1), ledger(2), ledger(3)), make_parents=True)
        if store_kind.zk is None:
            response = await stub.MarkLedgers(_request(1))
            assert (response.written, ml_ledger_ids((await store.get(ML_PATH)).data)) == (
                True,
                [2, 3],
            )
            return
        assert isinstance(store, MigrationGuardedStore)
        # Pulsar's own session writes the record: not one of ours, so not guarded.
        async with ZkMetadataStore.connect(store_kind.zk.address) as pulsar:
            coordinator = PulsarMigrationCoordinator(pulsar)
            await coordinator.set_initial_migration_phase()
            await _phase(coordinator, store, MigrationPhase.COPYING)
            assert await _refused(stub, _request(1)) == grpc.StatusCode.UNAVAILABLE
            assert ml_ledger_ids((await pulsar.get(ML_PATH)).data) == [1, 2, 3]
            await _phase(coordinator, store, MigrationPhase.FAILED)
            assert (await stub.MarkLedgers(_request(1))).written
            assert ml_ledger_ids((await pulsar.get(ML_PATH)).data) == [2, 3]
            await _phase(coordinator, store, MigrationPhase.COPYING)
            await _phase(coordinator, store, MigrationPhase.COMPLETED)
            assert await _refused(stub, _request(2)) == grpc.StatusCode.UNAVAILABLE
            assert ml_ledger_ids((await pulsar.get(ML_PATH)).data) == [2, 3]


async def _phase(
    coordinator: PulsarMigrationCoordinator,
    store: MigrationGuardedStore[Any],
    phase: MigrationPhase,
) -> None:
    """The coordinator writes `phase`; returns once the marker's guard has seen it (a watch
    brings it)."""
    await coordinator.update_phase(phase)
    async with asyncio.timeout(15):
        await store.follower.wait_for(lambda r: r == MigrationState(phase, TARGET_URL))
