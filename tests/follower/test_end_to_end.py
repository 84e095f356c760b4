"""End to end with an unmodified broker's writes: the real ZooKeeper, moto S3, the devstack
broker, the verifier (trusting the follower's key) and the deleter. Brokers trim, switch
cursor ledgers and fail most of their deletes; the follower's PDLIs get everything deleted
and nothing still referenced."""

from __future__ import annotations

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZooKeeperServer
from services.marker.owners import tiers_of
from services.metadata import (
    LedgerPaths,
    ManagedCursorInfo,
    ZkMetadataStore,
    cursor_path,
    decode_cursor_info,
    decode_managed_ledger_info,
    encode_cursor_info,
    encode_managed_ledger_info,
    managed_ledger_path,
)
from tests.deleter.stack import (
    CLUSTER,
    SMALL_SPEC,
    create_topics,
    pulsar_config,
    run_deleter_until_drained,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import ledgers_in_zookeeper, listed_now, objects_in_s3
from tests.follower.live import counter, running_follower
from tests.helpers import assert_eventually, signing_pair
from tombstone.v1 import pending_delete_pb2 as _pd

SIGNER, TRUSTED = signing_pair("follower-1")
NEW_CURSOR_LEDGERS = 9_000_000


class Unlinked:
    def __init__(self) -> None:
        self.bookkeeper: set[int] = set()
        self.offloaded: set[int] = set()
        self.pdlis = 0
        self.cursor_ledgers: set[int] = set()


async def _broker_trims(store: ZkMetadataStore, model: ClusterModel, out: Unlinked) -> None:
    """`ManagedLedgerImpl.internalTrimLedgers`: the list without all but the current ledger,
    in one write; then `asyncDeleteLedger` per ledger, which fails here for every other one
    (and for every offloaded copy): after its three attempts the broker gives up."""
    paths = LedgerPaths()
    for ml in model.managed_ledgers.values():
        if ml.shadow_source or len(ml.ledger_ids) < 2:
            continue
        path = managed_ledger_path(ml.name)
        node = await store.get(path)
        info = decode_managed_ledger_info(node.data, path=path)
        dropped = list(info.ledgerInfo[:-1])
        del info.ledgerInfo[:-1]
        await store.set(path, encode_managed_ledger_info(info), version=node.version)
        for n, li in enumerate(dropped):
            ref = tiers_of(li)
            out.pdlis += len(ref.tiers)
            if _pd.OFFLOAD_LEDGER in ref.tiers:
                out.offloaded.add(li.ledgerId)
            if _pd.LEDGER in ref.tiers:
                out.bookkeeper.add(li.ledgerId)
                if n % 2 == 0:  # the broker's delete that succeeded
                    await store.delete(paths.ledger_path(li.ledgerId), version=-1)


async def _cursor_switches(store: ZkMetadataStore, model: ClusterModel, out: Unlinked) -> None:
    """`ManagedCursorImpl.switchToNewLedger`: the cursor znode names the new ledger; the old
    one is deleted without being closed (it stays OPEN), and that delete fails here."""
    for n, cursor in enumerate(model.cursors.values()):
        if cursor.cursors_ledger_id < 0:
            continue
        path = cursor_path(cursor.ml_name, cursor.name)
        node = await store.get(path)
        info: ManagedCursorInfo = decode_cursor_info(node.data, path=path)
        out.bookkeeper.add(info.cursorsLedgerId)
        out.cursor_ledgers.add(info.cursorsLedgerId)
        out.pdlis += 1
        info.cursorsLedgerId = NEW_CURSOR_LEDGERS + n
        await store.set(path, encode_cursor_info(info), version=node.version)


async def test_broker_style_unlinks_with_failed_deletes_all_end_deleted(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Every ML trimmed to its current ledger (offloaded ones with and without
    `bookkeeperDeleted`) and every cursor switched, half the broker's deletes failing: once
    the deleter drained the follower's signed PDLIs, every unlinked ledger (the OPEN cursor
    ledgers too) is gone from ZooKeeper and every unlinked upload from S3; every listed
    ledger and its objects are untouched; nothing is dead-lettered."""
    create_topics(broker)
    model = await write_cluster(zk, s3, SMALL_SPEC)
    objects_before = objects_in_s3(s3)
    out = Unlinked()
    async with (
        running_verifier(zk, s3, trusted_keys=TRUSTED) as verifier,
        ZkMetadataStore.connect(zk.address) as store,
        running_follower(
            zk.address, broker, signer=SIGNER, pulsar=pulsar_config(broker), cluster=CLUSTER
        ) as running,
    ):
        await running.ready()
        await _broker_trims(store, model, out)
        await _cursor_switches(store, model, out)

        async def all_published() -> None:
            sent = sum(
                counter(running.metrics.pdlis, tier) for tier in ("ledger", "offload_ledger")
            )
            assert sent == out.pdlis

        await assert_eventually(all_published, timeout=20)
        status = await run_deleter_until_drained(zk, s3, broker, verifier)
    assert out.bookkeeper
    assert out.offloaded
    assert out.cursor_ledgers
    assert status.dead_letter_backlog == 0
    assert set() == await ledgers_in_zookeeper(zk, out.bookkeeper)
    gone = {o.key for o in model.objects.values() if o.ledger_id in out.offloaded}
    assert gone
    remaining = objects_in_s3(s3)
    assert set() == remaining & gone
    listed, listed_keys = await listed_now(zk, model)
    in_bookkeeper = {led.ledger_id for led in model.bookkeeper_ledgers()}
    kept = (listed - out.bookkeeper) & in_bookkeeper
    assert kept
    assert kept == await ledgers_in_zookeeper(zk, kept)
    assert listed_keys <= remaining
    assert objects_before - gone == remaining
