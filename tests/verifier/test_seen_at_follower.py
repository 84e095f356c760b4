"""A follower that lags across a delete and an id given again: its intent's `seen_at_ms` keeps
the new ledger from being deleted.

An unmodified broker trims ledger 2 of a topic and deletes it at once; the id is then given
to a new ledger of the same topic, still OPEN (in creation), as PIP-454's restarted id
generator does on Oxia (`test_reused_ids_oxia.py`; here on Oxia the id is drawn the same
way, on ZooKeeper, where ids do not repeat, the new ledger is written at the id's path).
All of it happens while no follower runs: the next one diffs against the checkpoint and
records the intent after the new ledger was created. Its `marked_at_ms` is then later than
the creation, and the verifier would approve the new ledger by the OPEN rule's "below the
owner's lowest reference"; `seen_at_ms`, the modification time of the checkpointed version
that listed the old ledger, is earlier, and the new ledger is refused.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from devstack.pulsar import PulsarBrokerProcess
from services.marker.follower.checkpoint import CheckpointStore
from services.metadata.ledger_metadata import LedgerState
from services.metadata.namespaces import encode_policies, policies_path
from services.metadata.paths import LAYOUT_ZNODE, LedgerLayout, layout_text
from services.metadata.pulsar_formats import ManagedLedgerInfo, encode_managed_ledger_info
from services.metadata.pulsar_names import managed_ledger_path
from services.metadata.store import MetadataStore
from services.verifier.model import Decision, SkipReason
from tests.follower.live import running_follower
from tests.helpers import assert_eventually
from tests.marker.live import create_system_topic, read_topic
from tests.store_kinds import StoreKind
from tests.verifier.test_reused_ids_oxia import IDGEN, PATHS, ledger, pulsar_ids, verifier
from tests.verifier.world import CLUSTER, ML
from tombstone.v1 import pending_delete_pb2 as pb

OLD = 2
"""The trimmed ledger's id, given again."""
CURRENT = 4
ML_PATH = managed_ledger_path(ML)
QUICK = timedelta(milliseconds=200)


def ml_listing(*ids: int) -> bytes:
    info = ManagedLedgerInfo()
    for ledger_id in ids:
        info.ledgerInfo.add(ledgerId=ledger_id, entries=1, size=10, timestamp=1)
    return encode_managed_ledger_info(info)


async def cluster(store: MetadataStore, oxia: bool) -> None:
    """The topic lists ledgers 2 (closed) and 4 (its current one, OPEN)."""
    await store.create(
        f"{PATHS.root}/{LAYOUT_ZNODE}", layout_text(LedgerLayout.HIERARCHICAL), make_parents=True
    )
    if oxia:
        await store.create(IDGEN, b"")  # as PIP-454 copies it: modifications count 0
    await store.create(
        policies_path("public/default"), encode_policies([CLUSTER]), make_parents=True
    )
    for ledger_id, state in ((OLD, LedgerState.CLOSED), (CURRENT, LedgerState.OPEN)):
        await store.create(
            PATHS.ledger_path(ledger_id), ledger(ledger_id, state), make_parents=True
        )
    await store.create(ML_PATH, ml_listing(OLD, CURRENT), make_parents=True)


async def checkpointed(store: MetadataStore, version: int) -> None:
    async def holds() -> None:
        index = await CheckpointStore(store).load()
        assert index is not None
        entry = index.get(ML_PATH)
        assert entry is not None
        assert entry[1] == version

    await assert_eventually(holds, timeout=10)


async def give_the_id_again(kind: StoreKind, store: MetadataStore) -> None:
    """The new ledger 2, OPEN, of the same topic: drawn as Pulsar draws ids on Oxia after a
    migration; on ZooKeeper written at the id's path."""
    if kind.oxia is not None:
        with pulsar_ids(kind) as ids:
            drawn = [await asyncio.to_thread(ids.draw) for _ in range(OLD)]
        assert drawn == [1, OLD]
    await store.create(PATHS.ledger_path(OLD), ledger(OLD, LedgerState.OPEN))


@pytest.mark.timeout(180)
async def test_a_lagging_follower_s_intent_does_not_delete_the_id_given_again(
    store_kind: StoreKind, broker: PulsarBrokerProcess, s3client: Any
) -> None:
    create_system_topic(broker)
    async with store_kind.open() as store:
        await cluster(store, oxia=store_kind.oxia is not None)
        listed = await store.get(ML_PATH)
        async with running_follower(
            store_kind, broker, checkpoint_interval=QUICK, cluster=CLUSTER
        ) as first:
            await first.ready()
            await checkpointed(store, listed.version)
            first.kill()
        # While no follower runs: the broker trims ledger 2 and deletes it, and the id is
        # given again. Each step in a later millisecond of the store's clock.
        await asyncio.sleep(0.01)
        await store.set(ML_PATH, ml_listing(CURRENT), version=listed.version)
        old_ledger = await store.get(PATHS.ledger_path(OLD))
        await store.delete(PATHS.ledger_path(OLD), version=old_ledger.version)
        await asyncio.sleep(0.01)
        await give_the_id_again(store_kind, store)
        created = (await store.get(PATHS.ledger_path(OLD))).ctime_ms
        async with running_follower(
            store_kind, broker, marker_id="second", cluster=CLUSTER
        ) as second:
            await second.ready()
            [received] = await read_topic(broker, 1)
        intent = received.pdli
        assert (intent.ledger_id, intent.source) == (OLD, pb.OBSERVED)
        assert intent.seen_at_ms == listed.mtime_ms < created < intent.marked_at_ms

        engine = verifier(store, s3client).engine
        refused = await engine.verify(intent)
        assert (refused.decision, refused.skip_reason, refused.code) == (
            Decision.SKIP,
            SkipReason.MISMATCH,
            "other_incarnation",
        ), refused
        # What the same intent without the stamp (a follower before it) would have done.
        unstamped = pb.PendingDeleteLedgerInfo()
        unstamped.CopyFrom(intent)
        unstamped.ClearField("seen_at_ms")
        assert (await engine.verify(unstamped)).decision is Decision.DELETE
        assert await store.exists(PATHS.ledger_path(OLD)) is not None
