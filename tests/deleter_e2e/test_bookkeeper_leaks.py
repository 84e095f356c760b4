"""What real Pulsar leaves in BookKeeper, end to end on the real parts (ZooKeeper, the
devstack broker, the marker, the verifier and the deleter): each artifact is deleted, or
dead-lettered with its reason, and never acknowledged while it stays behind.

Fixtures follow Pulsar's source, named in each test's docstring.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import replace
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc import aio

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.signing import IntentSigner, TrustedKeys
from services.deleter.app import Deleter, build
from services.deleter.config import DeleterConfig
from services.deleter.metrics import DeleterMetrics
from services.marker.marking import Marker
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.ledger_metadata import LedgerState
from services.metadata.paths import LedgerLayout, LedgerPaths
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic.retry import RetryPolicy
from tests.deleter.stack import (
    create_topics,
    deleter_config,
    drained,
    run_deleter_until_drained,
    running_e2e_deleter,
    running_marker,
    running_verifier,
)
from tests.helpers import assert_eventually
from tests.verifier.world import CURSOR, ML, World, cursor_meta, pdli
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf
from tombstone.v1 import verifier_pb2_grpc as _vf_grpc

HYBRID = LedgerPaths()
SHADOW_ML = f"{ML}-shadow"


@pytest.fixture
async def world(zk: ZooKeeperServer, broker: PulsarBrokerProcess) -> AsyncIterator[World]:
    """An empty cluster (no ledgers root yet) and the system topics."""
    create_topics(broker)
    async with ZkMetadataStore.connect(zk.address) as store:
        yield World(store)


async def mark(
    marker: Marker, component: int, ledger_ids: tuple[int, ...], new_cursor_ledger_id: int = -1
) -> None:
    owner = resolve_owner(
        component,
        topic_name="",
        ml_name=ML,
        cursor_name=CURSOR if component == _pd.MANAGED_CURSOR else "",
        schema_id="",
    )
    request = MarkRequest(
        owner=owner, ledger_ids=ledger_ids, new_cursor_ledger_id=new_cursor_ledger_id
    )
    result = await marker.mark(request)
    assert set(ledger_ids) == {ledger_id for ledger_id, _ in result.marked}


async def exists(world: World, path: str) -> bool:
    return await world.store.exists(path) is not None


async def test_open_old_cursor_ledger_after_a_switch_is_deleted(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """`ManagedCursorImpl.switchToNewLedger` persists the new `cursorsLedgerId` and then
    `asyncDeleteLedger(oldLedger)` without closing it: the old ledger is OPEN. Marked through
    the marker (the cursor moves to the new ledger), it is deleted; the new one stays."""
    await world.bookkeeper_root()
    await world.ledger(1)
    await world.ml([1])
    await world.ledger(5, cursor_meta(), state=LedgerState.OPEN)
    await world.ledger(6, cursor_meta(), state=LedgerState.OPEN)
    await world.cursor(5)
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            await mark(marker, _pd.MANAGED_CURSOR, (5,), new_cursor_ledger_id=6)
        status = await run_deleter_until_drained(zk, s3, broker, verifier)
    assert (
        await exists(world, HYBRID.ledger_path(5)),
        await exists(world, HYBRID.ledger_path(6)),
        status.dead_letter_backlog,
    ) == (False, True, 0)


async def test_open_cursor_ledger_after_an_unsubscribe_is_deleted(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Unsubscribe: `ManagedLedgerImpl.asyncDeleteCursor` removes the cursor znode, then
    `ManagedCursorImpl.asyncDeleteCursorLedger` deletes the ledger, never closed (OPEN).
    Marked through a signing marker, then the cursor znode removed as Pulsar does: deleted.
    (Unsigned, a gone cursor cannot be told from one whose znode is not written yet, so the
    OPEN ledger is only deleted with the marker's believed report or after the age window.)"""
    await world.bookkeeper_root()
    await world.ledger(1)
    await world.ml([1])
    await world.ledger(5, cursor_meta(), state=LedgerState.OPEN)
    await world.cursor(5)
    key = Ed25519PrivateKey.generate()
    trusted = TrustedKeys({"marker-1": key.public_key()})
    async with running_verifier(zk, s3, trusted_keys=trusted) as verifier:
        signer = IntentSigner({"marker-1": key}, "marker-1")
        async with running_marker(zk, broker, verifier, signer=signer) as marker:
            await mark(marker, _pd.MANAGED_CURSOR, (5,))
        cursor = f"/managed-ledgers/{ML}/{CURSOR}"
        await world.store.delete(cursor, version=(await world.store.get(cursor)).version)
        status = await run_deleter_until_drained(zk, s3, broker, verifier)
    assert (await exists(world, HYBRID.ledger_path(5)), status.dead_letter_backlog) == (False, 0)


async def test_long_hierarchical_layout_deletes_at_both_paths(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """`LAYOUT` names `LongHierarchicalLedgerManagerFactory` (`LedgerLayout.serialize`): a
    bookie-side client writes ledger 1 at the long path, while Pulsar ≥ 2.10's
    `PulsarLedgerManager` writes ledger 2 at the hybrid path whatever `LAYOUT` says. Both are
    deleted; ledger 3, absent at every path, is NOT_FOUND; the root and `LAYOUT` stay."""
    long = LedgerPaths(layout=LedgerLayout.LONG_HIERARCHICAL)
    await world.bookkeeper_root(LedgerLayout.LONG_HIERARCHICAL)
    await world.ledger(1, path=long.ledger_path(1))
    await world.ledger(2)
    await world.ledger(4, state=LedgerState.OPEN, path=long.ledger_path(4))
    await world.ml([1, 2, 3, 4])
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            await mark(marker, _pd.MANAGED_LEDGER, (1, 2, 3))
        async with aio.insecure_channel(verifier) as channel:
            absent = await _vf_grpc.VerifierStub(channel).Verify(
                _vf.VerifyRequest(pdli=pdli(3, fence=1))
            )
        status = await run_deleter_until_drained(zk, s3, broker, verifier)
    assert (absent.decision, absent.skip_reason) == (_vf.SKIP, _vf.NOT_FOUND)
    assert (
        await exists(world, long.ledger_path(1)),
        await exists(world, HYBRID.ledger_path(2)),
        await exists(world, long.ledger_path(4)),
        await exists(world, "/ledgers/LAYOUT"),
        status.dead_letter_backlog,
    ) == (False, False, True, True, 0)


async def test_pre_2_2_ledger_without_proof_is_dead_lettered(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Before Pulsar 2.2 `ManagedLedgerImpl` created ledgers without custom metadata. An
    unsigned intent proves nothing about whose it is: MISMATCH, dead-lettered as `mismatch`,
    and the ledger is left in place."""
    await world.bookkeeper_root()
    await world.ledger(1, {})
    await world.ledger(2)
    await world.ml([1, 2])
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            await mark(marker, _pd.MANAGED_LEDGER, (1,))
        async with running_e2e_deleter(zk, s3, broker, verifier) as running:
            await drained(running.deleter)
            letters, _ = await running.deleter.admin.list_dead_letters(limit=10)
    assert (
        [letter.pdli.ledger_id if letter.pdli else None for letter in letters],
        [letter.reason_code for letter in letters],
        await exists(world, HYBRID.ledger_path(1)),
    ) == ([1], ["mismatch"], True)


async def shadow_world(world: World) -> None:
    """A source topic and its shadow (PIP-180): `ShadowManagedLedgerImpl` keeps a copy of the
    source's ledger list under its own ML znode, named by the `PULSAR.SHADOW_SOURCE`
    property, and drops ledgers from it later than the source."""
    await world.bookkeeper_root()
    for ledger_id in (1, 2):
        await world.ledger(ledger_id)
    await world.ml([1, 2])
    source = {"PULSAR.SHADOW_SOURCE": "persistent://public/default/orders"}
    await world.ml([1, 2], ml=SHADOW_ML, properties=source)


async def test_shadow_reference_past_the_budget_ends_in_the_dlq(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """A ledger the shadow still lists is retried, never acknowledged: past the retry
    budget it is dead-lettered, and the ledger stays."""
    await shadow_world(world)
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            await mark(marker, _pd.MANAGED_LEDGER, (1,))
        status = await run_deleter_until_drained(zk, s3, broker, verifier)
    assert (status.dead_letter_backlog, await exists(world, HYBRID.ledger_path(1))) == (1, True)


@asynccontextmanager
async def counted_deleter(config: DeleterConfig) -> AsyncIterator[tuple[DeleterMetrics, Deleter]]:
    metrics = DeleterMetrics()
    async with AsyncExitStack() as stack:
        deleter = await build(stack, config, metrics)
        stop = asyncio.Event()
        task = asyncio.create_task(deleter.pool.run(stop))
        try:
            yield metrics, deleter
        finally:
            stop.set()
            await task


async def test_shadow_reference_dropped_later_is_deleted(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Retried while the shadow lists it; deleted once the shadow drops it."""
    await shadow_world(world)
    policy = RetryPolicy(
        initial_delay=timedelta(milliseconds=200), max_delay=timedelta(seconds=1), max_retries=60
    )
    async with running_verifier(zk, s3) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            await mark(marker, _pd.MANAGED_LEDGER, (1,))
        config = replace(deleter_config(zk, s3, broker, verifier), retry=policy)
        async with counted_deleter(config) as (metrics, deleter):

            async def retried() -> None:
                assert metrics.retried._value.get() >= 1

            await assert_eventually(retried, timeout=30)
            await world.ml([2], ml=SHADOW_ML, version=1)
            status = await drained(deleter)
    assert (status.dead_letter_backlog, await exists(world, HYBRID.ledger_path(1))) == (0, False)
