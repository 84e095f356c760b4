"""End to end with BookKeeper's metadata in a chroot of its own (`/bk`) beside Pulsar's
(`/pulsar`): the marker reads owners from Pulsar's store, the verifier reads the ledger znodes
and `LAYOUT` from BookKeeper's, and the deleter deletes the ledger znodes there."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.metadata import LedgerPaths, ManagedLedgers
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.deleter.stack import (
    SMALL_SPEC,
    create_topics,
    deleter_config,
    drained,
    mark_trims,
    running_deleter,
    running_marker,
    running_verifier,
)
from tests.split_stores import (
    BOOKKEEPER_CHROOT,
    PULSAR_CHROOT,
    split_zookeeper,
    write_split_cluster,
)
from tombstone.v1 import pending_delete_pb2 as _pd


async def ledgers_present(servers: str, ids: set[int]) -> set[int]:
    """The ids whose ledger znode exists in BookKeeper's chroot."""
    paths = LedgerPaths()
    async with ZkMetadataStore.connect(servers, chroot=BOOKKEEPER_CHROOT) as store:
        return {i for i in ids if await store.exists(paths.ledger_path(i)) is not None}


async def listed(servers: str, names: list[str]) -> set[int]:
    """The ledger ids the managed ledgers list now, read from Pulsar's chroot."""
    async with ZkMetadataStore.connect(servers, chroot=PULSAR_CHROOT) as store:
        mls = ManagedLedgers(store)
        return {
            entry.ledgerId for name in names for entry in (await mls.read(name)).value.ledgerInfo
        }


async def test_trimmed_ledgers_are_deleted_from_bookkeeper_s_own_chroot(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Pulsar's metadata under /pulsar and BookKeeper's under /bk (nothing at the root): every
    BookKeeper-tier ledger the marker unlinked is verified and deleted from /bk, and every
    ledger still listed stays there."""
    create_topics(broker)
    model = await write_split_cluster(SMALL_SPEC, zk.address, s3.client_config())
    stores = split_zookeeper(zk.address)
    async with running_verifier(zk, s3, zookeeper=stores) as verifier:
        async with running_marker(zk, broker, verifier, zookeeper=stores) as marker:
            marked = await mark_trims(marker, model)
        config = deleter_config(zk, s3, broker, verifier)
        config = dataclasses.replace(
            config,
            zookeeper=dataclasses.replace(stores, operation_timeout=timedelta(seconds=3)),
        )
        async with running_deleter(config) as running:
            status = await drained(running.deleter)
    kept = await listed(zk.address, list(model.managed_ledgers))
    in_bk = {led.ledger_id for led in model.bookkeeper_ledgers()}
    unlinked = (marked[_pd.LEDGER] - kept) & in_bk
    assert unlinked
    assert set() == await ledgers_present(zk.address, unlinked)
    assert kept & in_bk == await ledgers_present(zk.address, kept & in_bk)
    assert status.dead_letter_backlog == 0
