"""The believed set: a shortcut past the metadata match, durable, bounded and shared."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.core.errors import TombstoneError
from services.metadata.ledger_metadata import LedgerState
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.believed import (
    LAYOUT,
    BelievedConfig,
    BelievedSet,
    batch_name,
    bucket_name,
    decode_batch,
    encode_batch,
)
from services.verifier.model import Decision, SkipReason
from services.verifier.ports import WatchCallback, Znode
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from tests.helpers import assert_eventually
from tests.store_kinds import StoreKind
from tests.verifier.conftest import make_parts
from tests.verifier.world import OTHER_ML, World, cursor_meta, data_meta, pdli
from tombstone.v1 import pending_delete_pb2 as pb

ROOT = "/tombstone/believed"
BUCKETS = f"{ROOT}/{LAYOUT}"


@pytest.fixture
async def either_store(store_kind: StoreKind) -> AsyncIterator[MetadataStore]:
    """A session on the store of the shared parameter: the believed set's sequential batches
    and their watches run on ZooKeeper and on Oxia."""
    async with store_kind.open() as opened:
        yield opened


def key(request: pb.PendingDeleteLedgerInfo) -> int:
    return parse_target(request).believed_key


def believed_set(store: MetadataStore, **bounds: Any) -> BelievedSet:
    return BelievedSet(MetadataZnodeStore(store), BelievedConfig(root=ROOT, **bounds))


class CountingStore(MetadataZnodeStore):
    """The real store, counting what the believed set asks of it."""

    def __init__(self, store: MetadataStore) -> None:
        super().__init__(store)
        self.calls: Counter[str] = Counter()
        self.paths_read: Counter[str] = Counter()

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        self.calls["read_many"] += 1
        self.paths_read.update(paths)
        return await super().read_many(paths)

    async def children(self, path: str, *, watch: WatchCallback | None = None) -> list[str] | None:
        self.calls["children"] += 1
        return await super().children(path, watch=watch)

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        self.calls["create_sequential"] += 1
        return await super().create_sequential(prefix, data)


async def notifications_delivered(store: MetadataStore) -> None:
    """Return once the store has delivered the watch events of every change made so far.

    A store delivers them in order (ZooKeeper per session, the test Oxia server on its one
    shard's stream), so the event of one more change comes after all of them. On Oxia the
    stream may lag the writes: an event of an earlier change can still be on its way."""
    path = f"/delivered-{uuid.uuid4().hex}"
    _stat, fired = await store.watch(path)
    created = await store.create(path)
    await asyncio.wait_for(fired, timeout=30)
    await store.delete(path, version=created.version)


async def tree(store: MetadataStore) -> dict[str, list[str]]:
    """Bucket name -> its batch names, as the store holds them."""
    buckets = await MetadataZnodeStore(store).children(BUCKETS) or []
    return {name: sorted(await store.get_children(f"{BUCKETS}/{name}")) for name in sorted(buckets)}


def test_batch_encoding_round_trips() -> None:
    """A batch znode's bytes decode to exactly the keys written."""
    keys = [key(pdli(n)) for n in (0, 1, 2**62)]
    values = decode_batch(encode_batch(keys), "/x")
    assert [(values[i] << 64) | values[i + 1] for i in range(0, len(values), 2)] == keys


async def test_believed_ledger_skips_the_metadata_match(world: World, parts: Any) -> None:
    """A believed identity gets DELETE where the full check would say MISMATCH because the
    metadata leaves a key out (here `pulsar/managed-ledger`)."""
    await world.ledger(1, {"application": b"pulsar", "component": b"managed-ledger"})
    await parts.believed.add([key(pdli(1))])
    verdict = await parts.engine.verify(pdli(1))
    assert (verdict.decision, verdict.believed) == (Decision.DELETE, True)


@pytest.mark.parametrize(
    "metadata",
    [cursor_meta(), data_meta(OTHER_ML)],
    ids=["a-cursor-ledger", "another-ml"],
)
async def test_belief_never_vouches_for_metadata_naming_another_owner(
    world: World, parts: Any, metadata: dict[str, bytes]
) -> None:
    """Found by the simulation: the marker's belief about ledger 1 of `orders` stays in the
    set (up to a day), and a ledger created again under id 1 (`createLedgerAdv`) by another
    owner carries that owner's name. A stale PDLI (a retry, a redelivery) must not delete it:
    MISMATCH whatever the belief, as for offloaded objects naming another ML."""
    await world.ledger(1, metadata)
    await parts.believed.add([key(pdli(1))])
    verdict = await parts.engine.verify(pdli(1))
    assert (verdict.skip_reason, verdict.code) == (SkipReason.MISMATCH, "mismatch")


async def test_belief_is_no_proof_for_a_ledger_without_metadata(world: World, parts: Any) -> None:
    """A ledger created before Pulsar 2.2 (no custom metadata: `ManagedLedgerImpl` passed
    none to `asyncCreateLedger` before 2.2) needs a signed intent whose owner unlinked it; a
    best-effort belief is not one: MISMATCH `no_owner_proof` (dead-lettered)."""
    await world.ledger(1, {})
    await world.ml([2], version=1)
    await parts.believed.add([key(pdli(1, fence=1))])
    verdict = await parts.engine.verify(pdli(1, fence=1))
    assert (verdict.skip_reason, verdict.code) == (SkipReason.MISMATCH, "no_owner_proof")


async def test_belief_never_skips_the_in_use_check(world: World, parts: Any) -> None:
    """A believed ledger that is still listed stays IN_USE."""
    await world.ledger(1)
    await world.ml([1])
    await parts.believed.add([key(pdli(1))])
    verdict = await parts.engine.verify(pdli(1))
    assert verdict.skip_reason == SkipReason.IN_USE


async def test_belief_proves_an_open_ledger_unlinked(world: World, parts: Any) -> None:
    """The marker believes only ledgers its write unlinked, so a believed OPEN ledger is not
    one in creation (Pulsar deletes old cursor ledgers unclosed): DELETE."""
    await world.ledger(3, data_meta(), state=LedgerState.OPEN)
    await world.ml([2])
    await parts.believed.add([key(pdli(3))])
    verdict = await parts.engine.verify(pdli(3))
    assert verdict.decision == Decision.DELETE


async def test_an_unproven_fence_token_never_closes_an_open_ledger(
    world: World, parts: Any
) -> None:
    """An unsigned, unbelieved PDLI whose fence token the owner "reached", for an OPEN ledger
    newer than every listed one: the ledger may be a rollover in creation, and a fence token
    alone is anyone's to write. RETRY, never DELETE."""
    await world.ledger(3, data_meta(), state=LedgerState.OPEN)
    await world.ml([2], version=5)
    verdict = await parts.engine.verify(pdli(3, fence=1))
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "open_ledger")


async def test_belief_is_for_one_identity_only(world: World, parts: Any) -> None:
    """Believing ledger 1 of topic A does not vouch for "ledger 1 of topic B"."""
    await world.ledger(1, data_meta())
    await parts.believed.add([key(pdli(1))])
    verdict = await parts.engine.verify(pdli(1, ml=OTHER_ML))
    assert (verdict.decision, verdict.skip_reason) == (Decision.SKIP, SkipReason.MISMATCH)


async def test_reconciler_pdlis_get_no_shortcut(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """A RECONCILER PDLI is fully checked even when its identity is believed."""
    await world.ledger(1, {})
    built = make_parts(replace(config, reconciler_min_age=timedelta(0)), store, s3client)
    await built.believed.add([key(pdli(1, source=pb.RECONCILER))])
    verdict = await built.engine.verify(pdli(1, source=pb.RECONCILER))
    assert (verdict.skip_reason, verdict.believed) == (SkipReason.MISMATCH, False)


async def test_a_new_instance_loads_the_set(either_store: MetadataStore) -> None:
    """What one instance believed, a fresh one (a restarted verifier) loads from ZooKeeper."""
    keys = [key(pdli(n)) for n in range(10)]
    await believed_set(either_store).add(keys)
    restarted = believed_set(either_store)
    await restarted.refresh()
    assert [k in restarted for k in keys] == [True] * 10


async def test_replicas_converge_through_the_watch(store: ZkMetadataStore) -> None:
    """A replica sees another replica's Believe without being asked (children watch)."""
    writer, reader = believed_set(store), believed_set(store)
    await reader.refresh()
    await writer.add([key(pdli(42))])

    async def seen() -> None:
        assert key(pdli(42)) in reader

    await assert_eventually(seen)


async def test_a_lagging_replica_answers_like_the_others(
    world: World, parts: Any, store: Any
) -> None:
    """Before answering MISMATCH, a replica re-reads the set: it never contradicts one that
    already holds the belief (here about a ledger whose metadata leaves its ML out)."""
    await world.ledger(1, {"application": b"pulsar", "component": b"managed-ledger"})
    await believed_set(store).add([key(pdli(1))])  # another replica's Believe
    verdict = await parts.engine.verify(pdli(1))
    assert (verdict.decision, verdict.believed) == (Decision.DELETE, True)


async def test_concurrent_refreshes_share_one_reload(store: ZkMetadataStore) -> None:
    """A burst of refreshes (e.g. many MISMATCH verdicts at once) costs two reloads: the one
    running when they asked cannot answer them, the next one answers them all."""
    shared = believed_set(store)
    reloads = 0
    original = shared._reload

    async def counted() -> None:
        nonlocal reloads
        reloads += 1
        await original()

    shared._reload = counted  # type: ignore[method-assign]
    await asyncio.gather(*(shared.refresh() for _ in range(20)))
    assert reloads == 2


async def test_concurrent_calls_share_one_batch_znode(either_store: MetadataStore) -> None:
    """200 single-key Believe calls at once cost a few batch znodes, not 200 (group commit);
    each call returns only once its key is durable, and a fresh replica loads them all."""
    counted = CountingStore(either_store)
    writer = BelievedSet(counted, BelievedConfig(root=ROOT))
    keys = [key(pdli(n)) for n in range(200)]
    accepted = await asyncio.gather(*(writer.add([k]) for k in keys))
    written = sum(len(batches) for batches in (await tree(either_store)).values())
    restarted = believed_set(either_store)
    await restarted.refresh()
    assert (
        accepted == [1] * 200,
        written == counted.calls["create_sequential"],
        written <= 10,
        all(k in writer and k in restarted for k in keys),
    ) == (True, True, True, True)


async def test_a_large_call_spans_several_batches(store: ZkMetadataStore) -> None:
    """A call larger than a batch is written as several batch znodes of bounded size."""
    writer = believed_set(store, max_batch_entries=10)
    keys = [key(pdli(n)) for n in range(35)]
    await writer.add(keys)
    restarted = believed_set(store)
    await restarted.refresh()
    batches = [len(b) for b in (await tree(store)).values()]
    assert (sum(batches), all(k in restarted for k in keys)) == (4, True)


class UncountedStore(MetadataZnodeStore):
    """The real store, whose buckets' counts lag one batch behind: what a reader sees on Oxia
    between a new batch's creation and its bucket's advance
    (`OxiaMetadataStore.create_sequential` makes the child, then counts it in the parent)."""

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        nodes = await super().read_many(paths)
        return [
            replace(node, cversion=max(0, node.cversion - 1))
            if isinstance(node, Znode) and path.count("/") == BUCKETS.count("/") + 1
            else node
            for path, node in zip(paths, nodes, strict=True)
        ]


async def test_a_follower_loads_the_batch_its_bucket_does_not_count_yet(
    store: ZkMetadataStore,
) -> None:
    """The next batch a follower watches for may exist before its bucket counts it: the
    follower loads it from the watch's answer, and every later batch too. (Watching it
    again, it would wait for a change the batch never gets.)"""
    writer = believed_set(store)
    follower = BelievedSet(UncountedStore(store), BelievedConfig(root=ROOT))
    await writer.add([key(pdli(0))])
    await follower.refresh()
    keys = [key(pdli(n)) for n in range(1, 6)]
    for k in keys:
        await writer.add([k])

    async def caught_up() -> None:
        assert all(k in follower for k in [key(pdli(0)), *keys])

    await assert_eventually(caught_up, timeout=10)


async def test_replicas_follow_new_batches_without_relisting(either_store: MetadataStore) -> None:
    """A follower learns of each new batch through a watch on one name: it never lists a
    bucket again, and reads each new batch exactly once."""
    writer = believed_set(either_store)
    follower_store = CountingStore(either_store)
    follower = BelievedSet(follower_store, BelievedConfig(root=ROOT))
    await writer.add([key(pdli(0))])  # creates the bucket
    # The bucket's creation must not reach the watch the follower is about to set on the
    # bucket list: that late event would make it list the buckets again (rightly).
    await notifications_delivered(either_store)
    await follower.refresh()
    follower_store.calls.clear()
    follower_store.paths_read.clear()
    keys = [key(pdli(n)) for n in range(1, 41)]
    for k in keys:
        await writer.add([k])

    async def caught_up() -> None:
        assert all(k in follower for k in keys)

    # Forty batches, each a notification, a read and a new watch: seconds when the
    # machine is loaded by the rest of the suite.
    await assert_eventually(caught_up, timeout=30)
    batch_reads = {p: n for p, n in follower_store.paths_read.items() if "/b-" in p}
    assert (follower_store.calls["children"], len(batch_reads), set(batch_reads.values())) == (
        0,
        40,
        {1},
    )


async def test_children_lists_stay_within_the_bucket_bound(store: ZkMetadataStore) -> None:
    """Writers roll to a new bucket after `bucket_batches` batches: no list grows past it."""
    writer = believed_set(store, bucket_batches=5)
    for n in range(23):
        await writer.add([key(pdli(n))])
    layout = await tree(store)
    restarted = believed_set(store, bucket_batches=5)
    await restarted.refresh()
    assert (
        [len(batches) for batches in layout.values()],
        layout[min(layout)][:2],
        len(restarted),
    ) == ([5, 5, 5, 5, 3], [batch_name(0), batch_name(1)], 23)


async def test_the_count_bound_drops_whole_buckets(store: ZkMetadataStore) -> None:
    """Under a flood the set keeps the newest buckets within the entry bound; the older
    buckets leave memory and the store."""
    flooded = believed_set(store, max_entries=40, max_batch_entries=10)
    for start in range(0, 400, 10):
        await flooded.add([key(pdli(n)) for n in range(start, start + 10)])
    await flooded.apply_bounds()
    layout = await tree(store)
    assert (
        len(flooded),
        [len(batches) for batches in layout.values()],
        key(pdli(399)) in flooded,
        key(pdli(0)) in flooded,
    ) == (40, [1, 1, 1, 1], True, False)


async def test_the_age_bound_drops_whole_buckets(store: ZkMetadataStore) -> None:
    """Buckets whose time slot started before the age bound leave memory and the store; a
    replica loading the store afterwards holds only the young one."""
    now = [time.time()]
    config = BelievedConfig(
        root=ROOT, max_age=timedelta(hours=1), bucket_span=timedelta(minutes=10)
    )
    aged = BelievedSet(MetadataZnodeStore(store), config, clock=lambda: now[0])
    await aged.add([key(pdli(1))])
    await aged.add([key(pdli(2))])
    now[0] += 7200
    await aged.add([key(pdli(3))])
    await aged.apply_bounds()
    restarted = BelievedSet(MetadataZnodeStore(store), config, clock=lambda: now[0])
    await restarted.refresh()
    assert (
        [k in aged for k in (key(pdli(1)), key(pdli(2)), key(pdli(3)))],
        [len(batches) for batches in (await tree(store)).values()],
        len(restarted),
    ) == ([False, False, True], [1], 1)


async def test_corrupt_batches_are_skipped(store: ZkMetadataStore) -> None:
    """A damaged batch is skipped (a miss is safe), not fatal; its neighbours still load."""
    bucket = f"{BUCKETS}/{bucket_name(int(time.time() * 1000) // 3_600_000 * 3_600_000, 0)}"
    await store.create_sequential(f"{bucket}/b-", b"not a batch", make_parents=True)
    await store.create_sequential(f"{bucket}/b-", encode_batch([key(pdli(7))]))
    await store.create(f"{BUCKETS}/not-a-bucket", b"")
    loaded = believed_set(store)
    await loaded.refresh()
    assert (loaded.loaded, len(loaded), key(pdli(7)) in loaded) == (True, 1, True)


async def test_zookeeper_down_fails_the_call_and_holds_nothing(
    store: ZkMetadataStore, zk: ZooKeeperServer
) -> None:
    """With ZooKeeper stopped, Believe fails (the marker treats it as best effort) and the
    key is not held in memory; once ZooKeeper is back, the next call succeeds."""
    believed = believed_set(store)
    await believed.add([key(pdli(1))])
    zk.stop()
    try:
        with pytest.raises(TombstoneError):
            await believed.add([key(pdli(2))])
        held_during = (len(believed), key(pdli(2)) in believed)
    finally:
        zk.start()

    async def recovered() -> None:
        try:
            await believed.add([key(pdli(3))])
        except TombstoneError as e:
            raise AssertionError(f"still failing: {e}") from e

    await assert_eventually(recovered, timeout=30, interval=0.5)
    assert (held_during, key(pdli(3)) in believed) == ((1, False), True)


async def test_followers_drop_the_buckets_another_replica_expired(
    store: ZkMetadataStore,
) -> None:
    """When one replica deletes expired buckets, a follower drops them through its watch on
    the bucket list, and keeps what is still in the store."""
    now = [time.time()]
    config = BelievedConfig(
        root=ROOT, max_age=timedelta(hours=1), bucket_span=timedelta(minutes=10)
    )
    writer = BelievedSet(MetadataZnodeStore(store), config, clock=lambda: now[0])
    follower = BelievedSet(MetadataZnodeStore(store), BelievedConfig(root=ROOT))
    await writer.add([key(pdli(1))])
    await follower.refresh()
    now[0] += 7200
    await writer.add([key(pdli(2))])
    await writer.apply_bounds()

    async def followed() -> None:
        assert (key(pdli(1)) in follower, key(pdli(2)) in follower) == (False, True)

    await assert_eventually(followed)


async def test_a_follower_resumes_after_zookeeper_restarts(
    store: ZkMetadataStore, zk: ZooKeeperServer
) -> None:
    """Watches may be lost with the connection: the maintenance loop catches up after the
    reconnection and the follower sees batches written afterwards."""
    writer = believed_set(store)
    follower = believed_set(store)
    await writer.add([key(pdli(1))])
    loop = asyncio.create_task(
        follower.maintain(interval=timedelta(milliseconds=100), resync=timedelta(hours=1))
    )
    try:

        async def loaded() -> None:
            assert key(pdli(1)) in follower

        await assert_eventually(loaded)
        zk.stop()
        zk.start()

        async def written() -> None:
            try:
                await writer.add([key(pdli(2))])
            except TombstoneError as e:
                raise AssertionError(f"still failing: {e}") from e

        await assert_eventually(written, timeout=30, interval=0.5)

        async def followed() -> None:
            assert key(pdli(2)) in follower

        await assert_eventually(followed, timeout=30)
    finally:
        loop.cancel()
        follower.close()


GET_CHILDREN, GET_CHILDREN2, PING = 8, 12, 11


async def test_following_costs_a_constant_number_of_requests_per_batch(
    store: ZkMetadataStore, zk: ZooKeeperServer
) -> None:
    """Counted on the wire (a proxy in front of the follower's ZooKeeper): after its load, a
    follower spends at most three requests per batch another replica writes (the bucket's
    stat, the batch, the watch on the next name) and never lists children."""
    writer = believed_set(store)
    await writer.add([key(pdli(0))])
    async with (
        ZooKeeperFaultProxy(zk.host, zk.port) as proxy,
        ZkMetadataStore.connect(proxy.address, session_timeout=4.0) as proxied,
    ):
        follower = believed_set(proxied)
        await follower.refresh()
        proxy.requests.clear()
        keys = [key(pdli(n)) for n in range(1, 31)]
        for k in keys:
            await writer.add([k])

        async def caught_up() -> None:
            assert all(k in follower for k in keys)

        await assert_eventually(caught_up)
        follower.close()
        requests = {op: n for op, n in proxy.requests.items() if op != PING}
    listed = requests.get(GET_CHILDREN, 0) + requests.get(GET_CHILDREN2, 0)
    assert (listed, sum(requests.values()) <= 3 * len(keys)) == (0, True), requests
