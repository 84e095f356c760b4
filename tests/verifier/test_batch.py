"""`DecisionEngine.verify_batch`: one multiRead for the batch's ledgers, the same verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from devstack.zookeeper import ZooKeeperServer
from services.core.metrics import Metrics
from services.metadata.ledger_metadata import LedgerState
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, Verdict
from services.verifier.ports import Znode
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import CURSOR, SCHEMA, UUID, World, cursor_meta, pdli, schema_meta
from tombstone.v1 import pending_delete_pb2 as pb


def summary(verdict: Verdict) -> tuple[Any, ...]:
    return (
        verdict.decision,
        verdict.skip_reason,
        verdict.code,
        verdict.bookkeeper,
        verdict.offload,
        verdict.believed,
    )


async def mixed_world(world: World) -> list[pb.PendingDeleteLedgerInfo]:
    """Deletable, listed, absent, open, foreign, cursor, schema, offload and invalid PDLIs."""
    for ledger_id in (1, 2, 3):
        await world.ledger(ledger_id)
    await world.ledger(4, state=LedgerState.OPEN)
    await world.ledger(5, cursor_meta())
    await world.ledger(7, schema_meta())
    await world.ledger(8, {})
    await world.ml([2])
    await world.cursor(6)
    await world.schema([3])
    await world.objects(9)
    return [
        pdli(1),
        pdli(2),
        pdli(3),
        pdli(4),
        pdli(1),  # the same ledger twice: one read serves both
        pdli(5, component=pb.MANAGED_CURSOR, cursor=CURSOR),
        pdli(7, component=pb.SCHEMA_STORAGE, schema_id=SCHEMA),
        pdli(8),
        pdli(404),
        pdli(9, tier=pb.OFFLOAD_LEDGER, uuid=UUID),
        pdli(None),
    ]


async def test_batch_verdicts_equal_single_verdicts(world: World, parts: Any) -> None:
    """A mixed batch answers, in request order, exactly what one-by-one verification does."""
    requests = await mixed_world(world)
    single = [summary(await parts.engine.verify(request)) for request in requests]
    batch = [summary(verdict) for verdict in await parts.engine.verify_batch(requests)]
    assert single == batch


async def test_batch_counts_each_ledger_read(world: World, parts: Any) -> None:
    """The ledger-read metric counts every prefetched path once (duplicates read once), plus
    `<root>/LAYOUT`, read once per batch to confirm absences."""
    requests = await mixed_world(world)
    reads = parts.metrics.reads.labels("ledger")
    before = reads._value.get()
    await parts.engine.verify_batch(requests)
    assert reads._value.get() - before == 8 + 1


async def test_empty_batch_is_empty(parts: Any) -> None:
    """No PDLIs, no reads, no verdicts."""
    assert await parts.engine.verify_batch([]) == []


async def test_zookeeper_stopped_is_retry_never_not_found(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """With ZooKeeper down, the batch's BookKeeper verdicts (present and absent ledgers) are
    RETRY unavailable_zookeeper: a failed batch read is never taken as absence."""
    await world.ledger(1)
    zk.stop()
    try:
        verdicts = await parts.engine.verify_batch([pdli(1), pdli(2)])
    finally:
        zk.start()
    expected = [(Decision.RETRY, "unavailable_zookeeper")] * 2
    assert [(v.decision, v.code) for v in verdicts] == expected


class _BrokenBatchReads(MetadataZnodeStore):
    """The real store, except that the batch read fails as a whole with an unexpected error."""

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        raise RuntimeError("batch read broke")


async def test_a_failing_batch_read_is_retry_for_its_ledgers(
    world: World, config: VerifierConfig, store: ZkMetadataStore, s3client: Any
) -> None:
    """If the batch read itself raises, each BookKeeper PDLI is RETRY (never DELETE or
    NOT_FOUND) and the offload PDLI beside them is still decided."""
    await world.ledger(1)
    await world.objects(9)
    znodes = _BrokenBatchReads(store)
    parts = build(config, znodes, S3ObjectStore(s3client), VerifierMetrics(Metrics()))
    verdicts = await parts.engine.verify_batch(
        [pdli(1), pdli(2), pdli(9, tier=pb.OFFLOAD_LEDGER, uuid=UUID)]
    )
    assert [v.decision for v in verdicts] == [Decision.RETRY, Decision.RETRY, Decision.DELETE]


async def test_a_batch_of_one_namespace_reads_its_policies_once(world: World, parts: Any) -> None:
    """The PDLIs of a batch that share a namespace share one read of its policies znode (the
    shared-BookKeeper check), instead of one read each; the verdicts stay those of one-by-one
    verification."""
    ids = range(1, 41)
    for ledger_id in ids:
        await world.ledger(ledger_id)
    await world.ml([])
    requests = [pdli(ledger_id) for ledger_id in ids]
    single = [summary(await parts.engine.verify(request)) for request in requests]
    other = parts.metrics.reads.labels("other")
    before = other._value.get()
    batch = [summary(verdict) for verdict in await parts.engine.verify_batch(requests)]
    assert batch == single
    assert [s[0] for s in batch] == [Decision.DELETE] * len(ids)
    assert other._value.get() - before == 1
