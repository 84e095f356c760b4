"""The believed set: a shortcut past the metadata match, durable, bounded and shared."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

from services.metadata.ledger_metadata import LedgerState
from services.metadata.zk_store import ZkMetadataStore
from services.verifier.believed import BelievedConfig, BelievedSet, decode_batch, encode_batch
from services.verifier.model import Decision, SkipReason
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from tests.helpers import assert_eventually
from tests.verifier.conftest import make_parts
from tests.verifier.world import OTHER_ML, World, cursor_meta, data_meta, pdli
from tombstone.v1 import pending_delete_pb2 as pb

ROOT = "/tombstone/believed"


def key(request: pb.PendingDeleteLedgerInfo) -> int:
    return parse_target(request).believed_key


def believed_set(store: ZkMetadataStore, **bounds: Any) -> BelievedSet:
    return BelievedSet(MetadataZnodeStore(store), BelievedConfig(root=ROOT, **bounds))


def test_batch_encoding_round_trips() -> None:
    """A batch znode's bytes decode to exactly the keys written."""
    keys = [key(pdli(n)) for n in (0, 1, 2**62)]
    values = decode_batch(encode_batch(keys), "/x")
    assert [(values[i] << 64) | values[i + 1] for i in range(0, len(values), 2)] == keys


async def test_believed_ledger_skips_the_metadata_match(world: World, parts: Any) -> None:
    """A believed identity gets DELETE even where the full check would say MISMATCH."""
    await world.ledger(1, cursor_meta())  # Pulsar metadata that does not fit the PDLI
    await parts.believed.add([key(pdli(1))])
    verdict = await parts.engine.verify(pdli(1))
    assert (verdict.decision, verdict.believed) == (Decision.DELETE, True)


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


async def test_belief_never_skips_the_open_ledger_rule(world: World, parts: Any) -> None:
    """A believed OPEN ledger newer than every listed one, without a fence token, may be a
    rollover in creation: RETRY, belief or not."""
    await world.ledger(3, state=LedgerState.OPEN)
    await world.ml([2])
    await parts.believed.add([key(pdli(3))])
    verdict = await parts.engine.verify(pdli(3))
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


async def test_a_new_instance_loads_the_set(store: ZkMetadataStore) -> None:
    """What one instance believed, a fresh one (a restarted verifier) loads from ZooKeeper."""
    keys = [key(pdli(n)) for n in range(10)]
    await believed_set(store).add(keys)
    restarted = believed_set(store)
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
    already holds the belief."""
    await world.ledger(1, cursor_meta())
    await believed_set(store).add([key(pdli(1))])  # another replica's Believe
    verdict = await parts.engine.verify(pdli(1))
    assert (verdict.decision, verdict.believed) == (Decision.DELETE, True)


async def test_the_set_stays_within_its_entry_bound(store: ZkMetadataStore) -> None:
    """Under a flood of Believe calls the set keeps only the newest entries within the bound."""
    flooded = believed_set(store, max_entries=50, max_batch_entries=10)
    for start in range(0, 400, 10):
        await flooded.add([key(pdli(n)) for n in range(start, start + 10)])
    children = await MetadataZnodeStore(store).children(ROOT)
    assert (
        len(flooded),
        len(children or []),
        key(pdli(399)) in flooded,
        key(pdli(0)) in flooded,
    ) == (50, 5, True, False)


async def test_old_batches_are_dropped(store: ZkMetadataStore) -> None:
    """Batches older than the age bound leave the set and the store."""
    now = [1_000_000.0]
    aged = BelievedSet(
        MetadataZnodeStore(store),
        BelievedConfig(root=ROOT, max_age=timedelta(hours=1)),
        clock=lambda: now[0],
    )
    await aged.add([key(pdli(1))])
    now[0] += 7200
    await aged.add([key(pdli(2))])
    assert (
        key(pdli(1)) in aged,
        key(pdli(2)) in aged,
        len(await aged._store.children(ROOT) or []),
    ) == (False, True, 1)


async def test_corrupt_batches_are_skipped(store: ZkMetadataStore) -> None:
    """A foreign znode under the root is ignored (a miss is safe), not fatal."""
    await store.create(f"{ROOT}/b-0000000000001-garbage", b"not a batch", make_parents=True)
    loaded = believed_set(store)
    await loaded.refresh()
    assert (loaded.loaded, len(loaded)) == (True, 0)


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
