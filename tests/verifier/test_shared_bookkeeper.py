"""Two Pulsar clusters sharing one BookKeeper, on the real ZooKeeper: whose owner?

Cluster `standalone` (ours) keeps its metadata in chroot `/a`, which also holds the ledgers
root `/a/ledgers`; cluster `east` keeps its own in chroot `/b` and creates its ledgers in
`/a/ledgers`, as a cluster initialised with `pulsar initialize-cluster-metadata
--existing-bk-metadata-service-uri zk:.../a/ledgers` does (`PulsarClusterMetadataSetup`,
Pulsar >= 2.6). Namespace policies are `NamespaceResources`' JSON at
`/admin/policies/<tenant>/<ns>` of each cluster's own store; `geo/ns` is geo-replicated to
both, so `geo/ns/persistent/t` exists in both and each side's ledgers carry the same
`pulsar/managed-ledger` custom metadata (`ManagedLedgerImpl.createLedgerAfterClosed` writes
the ML name, never the cluster).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.core.metrics import Metrics
from services.metadata.ledger_metadata import LedgerState
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, SkipReason, Verdict
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import (
    CLUSTER,
    World,
    cursor_meta,
    data_meta,
    pdli,
    schema_meta,
)
from tombstone.v1 import pending_delete_pb2 as pb

NEIGHBOUR = "east"
THEIRS = "east-only/ns/persistent/x"
THEIR_SCHEMA = "east-only/ns/x"
GEO = "geo/ns/persistent/t"
OURS = "public/default/persistent/orders"
ONLY_THERE = "public/default/persistent/only-east"
FOREIGN, DELETE, RETRY = SkipReason.FOREIGN, Decision.DELETE, Decision.RETRY
OLD = 1_000  # ms since the epoch: past every age window


@dataclass
class Clusters:
    ours: ZkMetadataStore
    theirs: ZkMetadataStore
    us: World
    them: World


async def _connect(zk: ZooKeeperServer, chroot: str) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(
        zk.address, chroot=chroot, session_timeout=4.0, request_timeout=2.0
    ) as store:
        yield store


@pytest.fixture
async def clusters(zk: ZooKeeperServer, store: ZkMetadataStore) -> AsyncIterator[Clusters]:
    for chroot in ("/a", "/b"):
        await store.create(chroot)
    async for ours in _connect(zk, "/a"):
        async for theirs in _connect(zk, "/b"):
            us, them = World(ours), World(theirs)
            await us.bookkeeper_root()
            await them.store.create("/managed-ledgers")
            await them.store.create("/schemas")
            await _populate(us, them)
            yield Clusters(ours, theirs, us, them)


async def _populate(us: World, them: World) -> None:
    """Each cluster's namespaces and owners, and every ledger in the one shared root."""
    await us.namespace("geo/ns", (CLUSTER, NEIGHBOUR))
    await them.namespace("public/default", (NEIGHBOUR,))
    await them.namespace("east-only/ns", (NEIGHBOUR,))
    await them.namespace("geo/ns", (CLUSTER, NEIGHBOUR))
    # Ours: an orphan (11) of a topic still listing 10; the geo topic lists 50.
    await us.ml([10], ml=OURS)
    await us.ml([50], ml=GEO)
    # Theirs: a topic with a closed and an OPEN current ledger, an OPEN cursor ledger and a
    # schema; the geo topic lists 40 and has an OPEN ledger 42 in creation (a rollover).
    await them.ml([30, 31], ml=THEIRS)
    await them.cursor(32, ml=THEIRS, cursor="sub")
    await them.schema([33], schema_id=THEIR_SCHEMA)
    await them.ml([40], ml=GEO)
    await them.ml([60], ml=ONLY_THERE)
    for ledger_id, custom, state in [
        (10, data_meta(OURS), LedgerState.CLOSED),
        (11, data_meta(OURS), LedgerState.CLOSED),
        (30, data_meta(THEIRS), LedgerState.CLOSED),
        (31, data_meta(THEIRS), LedgerState.OPEN),
        (32, cursor_meta(THEIRS, "sub"), LedgerState.OPEN),
        (33, schema_meta(THEIR_SCHEMA), LedgerState.CLOSED),
        (40, data_meta(GEO), LedgerState.CLOSED),
        (42, data_meta(GEO), LedgerState.OPEN),
        (60, data_meta(ONLY_THERE), LedgerState.CLOSED),
        (61, data_meta(ONLY_THERE), LedgerState.CLOSED),
    ]:
        await us.ledger(ledger_id, custom, state=state, ctime=None if ledger_id == 42 else OLD)


def _engine(config: VerifierConfig, clusters: Clusters, s3client: Any, declared: bool) -> Any:
    neighbours = {NEIGHBOUR: MetadataZnodeStore(clusters.theirs)} if declared else None
    return build(
        replace(config, reconciler_min_age=timedelta(0)),
        MetadataZnodeStore(clusters.ours),
        S3ObjectStore(s3client),
        VerifierMetrics(Metrics()),
        neighbours=neighbours,
    ).engine


def _got(verdict: Verdict) -> tuple[Any, ...]:
    return (verdict.decision, verdict.skip_reason, verdict.code)


def _skip(code: str) -> tuple[Any, ...]:
    return (Decision.SKIP, FOREIGN, code)


THEIR_LEDGERS = [
    pdli(30, ml=THEIRS, fence=0),
    pdli(31, ml=THEIRS, fence=0),
    pdli(32, ml=THEIRS, component=pb.MANAGED_CURSOR, cursor="sub", fence=0),
    pdli(33, component=pb.SCHEMA_STORAGE, schema_id=THEIR_SCHEMA, fence=0),
]


@pytest.mark.parametrize("source", [pb.BROKER, pb.OBSERVED, pb.RECONCILER, pb.OPERATOR])
async def test_undeclared_neighbour_ledgers_are_foreign(
    clusters: Clusters, config: VerifierConfig, s3client: Any, source: Any
) -> None:
    """Nothing declared: the neighbour's closed, OPEN current, OPEN cursor and schema ledgers
    name owners absent here in a namespace with no policies here. None is deleted; each is
    dead-lettered as FOREIGN `namespace_unknown`, whatever the PDLI's source."""
    engine = _engine(config, clusters, s3client, declared=False)
    for request in THEIR_LEDGERS:
        request.source = source
        assert _got(await engine.verify(request)) == _skip("namespace_unknown")
    assert [_got(v) for v in await engine.verify_batch(THEIR_LEDGERS)] == [
        _skip("namespace_unknown")
    ] * len(THEIR_LEDGERS)


async def test_declared_neighbour_references_are_foreign(
    clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """Declared: every ledger the neighbour lists (ML, cursor, schema, the geo topic's) is
    `referenced_by_cluster`; a ledger whose owner exists only there is `owner_in_cluster`."""
    engine = _engine(config, clusters, s3client, declared=True)
    for request in [*THEIR_LEDGERS, pdli(40, ml=GEO, source=pb.RECONCILER)]:
        assert _got(await engine.verify(request)) == _skip("referenced_by_cluster")
    unlisted = pdli(61, ml=ONLY_THERE, source=pb.RECONCILER)
    assert _got(await engine.verify(unlisted)) == _skip("owner_in_cluster")


async def test_undeclared_same_namespace_owner_is_not_detected(
    clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """The limit docs/verifier.md names: undeclared, a neighbour's topic in a namespace that
    exists here too (`public/default` exists in every cluster) reads as a deleted topic of
    ours. Declared, it is the neighbour's."""
    request = pdli(61, ml=ONLY_THERE, source=pb.RECONCILER)
    undeclared = _engine(config, clusters, s3client, declared=False)
    assert (await undeclared.verify(request)).decision is DELETE
    declared = _engine(config, clusters, s3client, declared=True)
    assert _got(await declared.verify(request)) == _skip("owner_in_cluster")


async def test_replicated_namespace_needs_proof_or_declaration(
    clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """`geo/ns` replicates to `east`: the neighbour's ledger 40 matches our geo owner's metadata
    and our owner does not list it. Undeclared, an intent that does not prove our owner listed
    it (reconciler, operator, unsigned broker) is `replicated_undeclared`; declared, the
    neighbour's list decides; named as having a BookKeeper of its own, it is deleted."""
    undeclared = _engine(config, clusters, s3client, declared=False)
    for source in (pb.RECONCILER, pb.OPERATOR, pb.BROKER):
        request = pdli(40, ml=GEO, source=source, fence=0)
        assert _got(await undeclared.verify(request)) == _skip("replicated_undeclared")
    separate = replace(config, unshared_clusters=frozenset({NEIGHBOUR}))
    alone = _engine(separate, clusters, s3client, declared=False)
    assert (await alone.verify(pdli(40, ml=GEO, source=pb.RECONCILER))).decision is DELETE


async def test_a_declared_neighbour_with_the_same_owner_needs_a_proof(
    clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """Declared, `east` has the geo topic too and does not list 42 (OPEN): 42 may be its
    rollover in progress or a ledger it leaked, and its metadata matches our owner exactly.
    Nothing but the intent says our owner listed it: `owner_shared`, never DELETE."""
    declared = _engine(config, clusters, s3client, declared=True)
    for source in (pb.RECONCILER, pb.BROKER):
        verdict = await declared.verify(pdli(42, ml=GEO, source=source, fence=0))
        assert _got(verdict) == _skip("owner_shared")


@pytest.mark.parametrize("cluster", ["east", "", "Standalone"])
@pytest.mark.parametrize("tier", [pb.LEDGER, pb.OFFLOAD_LEDGER])
async def test_a_pdli_of_another_cluster_is_never_acted_on(
    clusters: Clusters, config: VerifierConfig, s3client: Any, cluster: str, tier: Any
) -> None:
    """Our own orphan 11, but the PDLI names another cluster (or none): FOREIGN
    `other_cluster` on both tiers, before anything is read. Our cluster's PDLI deletes it."""
    engine = _engine(config, clusters, s3client, declared=False)
    uuid = "3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a6b" if tier == pb.OFFLOAD_LEDGER else None
    request = pdli(11, ml=OURS, tier=tier, uuid=uuid, cluster=cluster)
    assert _got(await engine.verify(request)) == _skip("other_cluster")
    assert (await engine.verify(pdli(11, ml=OURS))).decision is DELETE


async def test_deleted_namespace_named_by_the_operator(
    clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """A namespace deleted here leaves no policies: its leftovers are FOREIGN until the operator
    names it as deleted (`TOMBSTONE_VERIFIER_DELETED_NAMESPACES`); then the owner's absence
    counts. A declared neighbour still wins over the name."""
    gone = "gone/ns/persistent/y"
    await clusters.us.ledger(70, data_meta(gone), ctime=OLD)
    engine = _engine(config, clusters, s3client, declared=False)
    assert _got(await engine.verify(pdli(70, ml=gone))) == _skip("namespace_unknown")
    named = replace(config, deleted_namespaces=frozenset({"gone/ns", "east-only/ns"}))
    assert (await _engine(named, clusters, s3client, False).verify(pdli(70, ml=gone))).decision is (
        DELETE
    )
    declared = _engine(named, clusters, s3client, declared=True)
    assert _got(await declared.verify(THEIR_LEDGERS[0])) == _skip("referenced_by_cluster")


async def test_neighbour_store_down_is_retry_never_delete(
    zk: ZooKeeperServer, clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """Unknown is not negative: with the ZooKeeper stopped, our orphan's verdict is RETRY
    (naming ZooKeeper so the deleter pauses), never DELETE or FOREIGN."""
    engine = _engine(config, clusters, s3client, declared=True)
    zk.pause()
    try:
        verdict = await engine.verify(pdli(11, ml=OURS))
    finally:
        zk.resume()
    assert verdict.decision is RETRY
    assert verdict.code.startswith("unavailable")


async def test_two_ledgers_of_ours_are_still_deleted(
    clusters: Clusters, config: VerifierConfig, s3client: Any
) -> None:
    """Declared or not, our own orphan is deleted and our listed ledger is IN_USE."""
    for declared in (False, True):
        engine = _engine(config, clusters, s3client, declared)
        assert (await engine.verify(pdli(11, ml=OURS))).decision is DELETE
        listed = await engine.verify(pdli(10, ml=OURS, fence=0))
        assert listed.skip_reason is SkipReason.IN_USE
