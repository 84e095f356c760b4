"""Compacted-topic ledgers and delayed-delivery bucket snapshots, end to end on the real parts
(ZooKeeper, the devstack broker, the marker, the verifier and the deleter): the leaked ones
are deleted through marker → deleter, the ones a cursor property still names are not.

The cursor znodes and ledgers model Pulsar's writes (`tests/verifier/property_world.py`):
`AbstractTwoPhaseCompactor.phaseTwo` names the new compacted ledger in the `__compaction`
cursor's `CompactedTopicLedger` property, then `CompactedTopicImpl.newCompactedLedger` deletes
the previous one, which can fail; `BucketDelayedDeliveryTracker` removes a merged bucket's
cursor property, then `BookkeeperBucketSnapshotStorage.deleteBucketSnapshot` deletes its
ledger, which can fail too (before 3.0.8 / 3.3.3).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.marker.marking import Marker
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.paths import LedgerPaths
from services.metadata.pulsar_formats import decode_cursor_info
from services.metadata.pulsar_names import cursor_path
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.deleter.stack import (
    create_topics,
    drained,
    running_e2e_deleter,
    running_marker,
    running_verifier,
)
from tests.verifier.property_world import (
    BUCKET_KEY,
    COMPACTION,
    SUB_CURSOR,
    bucket_meta,
    compacted_meta,
    cursor_znode,
)
from tests.verifier.world import ML, TOPIC, World
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

HYBRID = LedgerPaths()
OTHER_KEY = "#pulsar.internal.delayed.bucket_10_14"


@pytest.fixture
async def world(zk: ZooKeeperServer, broker: PulsarBrokerProcess) -> AsyncIterator[World]:
    create_topics(broker)
    async with ZkMetadataStore.connect(zk.address) as store:
        yield World(store)


async def mark(marker: Marker, component: int, cursor: str, *ids: int, **kwargs: object) -> Any:
    owner = resolve_owner(component, topic_name=TOPIC, ml_name="", cursor_name=cursor, schema_id="")
    return await marker.mark(MarkRequest(owner=owner, ledger_ids=ids, **kwargs))  # type: ignore[arg-type]


async def exists(world: World, ledger_id: int) -> bool:
    return await world.store.exists(HYBRID.ledger_path(ledger_id)) is not None


async def test_leaked_property_ledgers_are_deleted_and_named_ones_stay(
    world: World, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """- compacted ledger 7, whose delete failed after ledger 9 was named: a reconciler
      request marks it, the deleter deletes it;
    - compacted ledger 9, still named: the reconciler request is refused (STILL_REFERENCED);
      a caller-writes intent whose write never comes is retried, dead-lettered, never deleted;
    - bucket snapshot 10, whose property a merge removed before its delete failed: deleted
      through a reconciler request;
    - bucket snapshot 8: the marker removes its property (marker-writes), then it is deleted;
    - bucket snapshot 12, still named: never marked, stays."""
    await world.bookkeeper_root()
    await world.ledger(1)
    await world.ml([1])
    for ledger_id in (7, 9):
        await world.ledger(ledger_id, compacted_meta())
    for ledger_id in (8, 10, 12):
        await world.ledger(ledger_id, bucket_meta())
    await cursor_znode(world, COMPACTION, compacted=9)
    await cursor_znode(world, SUB_CURSOR, ledger=40, buckets={BUCKET_KEY: "8", OTHER_KEY: "12"})
    async with running_verifier(zk, s3, property_ledger_min_age=timedelta(0)) as verifier:
        async with running_marker(zk, broker, verifier) as marker:
            leaked = await mark(
                marker, _pd.COMPACTED_LEDGER, COMPACTION, 7, 9, source=_pd.RECONCILER
            )
            pending = await mark(marker, _pd.COMPACTED_LEDGER, COMPACTION, 9, caller_writes=True)
            merged = await mark(
                marker, _pd.DELAYED_INDEX_BUCKET, SUB_CURSOR, 10, source=_pd.RECONCILER
            )
            unlinked = await mark(marker, _pd.DELAYED_INDEX_BUCKET, SUB_CURSOR, 8)
        async with running_e2e_deleter(zk, s3, broker, verifier) as running:
            status = await drained(running.deleter)
            letters, _ = await running.deleter.admin.list_dead_letters(limit=10)
    assert [ledger_id for ledger_id, _ in leaked.marked] == [7]
    assert [(n.ledger_id, n.reason) for n in leaked.not_marked] == [(9, _mk.STILL_REFERENCED)]
    assert ([i for i, _ in pending.marked], pending.written) == ([9], False)
    assert [i for i, _ in merged.marked] == [10]
    assert ([i for i, _ in unlinked.marked], unlinked.written) == ([8], True)
    path = cursor_path(ML, SUB_CURSOR)
    info = decode_cursor_info((await world.store.get(path)).data, path=path)
    assert [(p.name, p.value) for p in info.cursorProperties] == [(OTHER_KEY, "12")]
    assert {i: await exists(world, i) for i in (7, 8, 9, 10, 12)} == {
        7: False,
        8: False,
        9: True,
        10: False,
        12: True,
    }
    assert [letter.pdli.ledger_id if letter.pdli else None for letter in letters] == [9]
    assert "__compaction lists the ledger at version 0 < fence token 1" in letters[0].reason
    assert status.dead_letter_backlog == 1
