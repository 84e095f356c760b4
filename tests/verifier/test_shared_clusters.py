"""Whose owner? Ledgers of another Pulsar cluster sharing our ledgers root
(docs/design.md §3 S2, §4).

A geo-replicated namespace has the same topic names in each cluster, so the neighbour's
ledgers carry custom metadata naming our owner exactly, and the PDLI's `source` is whatever
its producer wrote. The simulation (docs/simulation.md, "Real bugs found") found the
neighbour's ledgers deleted two ways: with the neighbour declared, a reconciler intent for a
ledger it had leaked under our topic's name (the check only looked for a neighbour still
referencing it); with the neighbour undeclared, an unsigned PDLI claiming BROKER or OBSERVED
(the replication check asked proof only of reconciler and operator intents). Proof that our
owner listed the ledger is now asked of any intent naming an owner another cluster may have
too.
"""

from __future__ import annotations

from typing import Any

import pytest

from services.core.metrics import Metrics
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import VerifierParts, build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, SkipReason
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from tests.verifier.world import CLUSTER, EAST, World, data_meta, pdli, schema_meta
from tombstone.v1 import pending_delete_pb2 as pb

GEO = "public/geo"
GEO_ML = f"{GEO}/persistent/orders"
GEO_SCHEMA = f"{GEO}/orders"


async def _parts(
    config: VerifierConfig, store: ZkMetadataStore, s3client: Any, east: World | None
) -> VerifierParts:
    neighbours = {EAST: MetadataZnodeStore(east.store)} if east is not None else None
    built = build(
        config,
        MetadataZnodeStore(store),
        S3ObjectStore(s3client),
        VerifierMetrics(Metrics()),
        neighbours=neighbours,
    )
    await built.believed.refresh()
    return built


async def _geo_world(world: World) -> None:
    """Our geo topic lists ledger 5; ledger 9, named as our topic, is not ours: the
    neighbour's topic of the same name created it and trimmed it (its own delete failed)."""
    await world.namespace(GEO, (CLUSTER, EAST))
    await world.ledger(5, data_meta(GEO_ML))
    await world.ledger(9, data_meta(GEO_ML))
    await world.ml([5], ml=GEO_ML, version=3)


def _forged(source: pb.Source.ValueType = pb.BROKER) -> pb.PendingDeleteLedgerInfo:
    return pdli(9, ml=GEO_ML, fence=1, source=source)


@pytest.mark.parametrize("source", [pb.BROKER, pb.OBSERVED, pb.RECONCILER])
async def test_an_unproven_intent_for_a_declared_neighbours_owner_name_is_foreign(
    world: World,
    east: World,
    config: VerifierConfig,
    store: ZkMetadataStore,
    s3client: Any,
    source: pb.Source.ValueType,
) -> None:
    await _geo_world(world)
    await east.namespace(GEO, (CLUSTER, EAST))
    await east.ml([11], ml=GEO_ML)  # the neighbour's topic exists; it no longer lists 9
    parts = await _parts(config, store, s3client, east)

    verdict = await parts.engine.verify(_forged(source))

    assert verdict.decision is Decision.SKIP, verdict
    assert verdict.skip_reason is SkipReason.FOREIGN
    assert verdict.code == "owner_shared"


async def test_an_unproven_intent_in_a_namespace_replicated_to_an_undeclared_cluster_is_foreign(
    world: World, config: VerifierConfig, store: ZkMetadataStore, s3client: Any
) -> None:
    await _geo_world(world)
    parts = await _parts(config, store, s3client, None)

    verdict = await parts.engine.verify(_forged(pb.OBSERVED))

    assert verdict.skip_reason is SkipReason.FOREIGN, verdict
    assert verdict.code == "replicated_undeclared"


async def test_a_namespace_replicated_to_a_declared_cluster_that_lost_the_topic_still_asks_proof(
    world: World,
    east: World,
    config: VerifierConfig,
    store: ZkMetadataStore,
    s3client: Any,
) -> None:
    """The neighbour deleted its topic of that name; its leaked ledgers still name it."""
    await _geo_world(world)
    parts = await _parts(config, store, s3client, east)

    verdict = await parts.engine.verify(_forged())

    assert verdict.skip_reason is SkipReason.FOREIGN, verdict
    assert verdict.code == "owner_shared"


@pytest.mark.parametrize("declared", [True, False])
async def test_an_absent_owner_in_a_replicated_namespace_asks_proof(
    world: World,
    east: World,
    config: VerifierConfig,
    store: ZkMetadataStore,
    s3client: Any,
    declared: bool,
) -> None:
    """Seed 554: our geo topic has no schema; the neighbour's topic of the same name does,
    and an unsigned PDLI naming our cluster and that schema id deleted its ledger (S1)."""
    await world.namespace(GEO, (CLUSTER, EAST))
    await world.ledger(22, schema_meta(GEO_SCHEMA))
    await east.schema([22], schema_id=GEO_SCHEMA)
    parts = await _parts(config, store, s3client, east if declared else None)
    forged = pdli(22, component=pb.SCHEMA_STORAGE, schema_id=GEO_SCHEMA, fence=1)

    verdict = await parts.engine.verify(forged)

    assert verdict.skip_reason is SkipReason.FOREIGN, verdict
    expected = "referenced_by_cluster" if declared else "replicated_undeclared"
    assert verdict.code == expected


@pytest.mark.parametrize("declared", [True, False])
async def test_the_markers_belief_proves_the_ledger_ours(
    world: World,
    east: World,
    config: VerifierConfig,
    store: ZkMetadataStore,
    s3client: Any,
    declared: bool,
) -> None:
    await _geo_world(world)
    await east.ml([11], ml=GEO_ML)
    parts = await _parts(config, store, s3client, east if declared else None)
    ours = _forged()
    await parts.believed.add([parse_target(ours).believed_key])

    verdict = await parts.engine.verify(ours)

    assert verdict.decision is Decision.DELETE, verdict


async def test_an_owner_name_only_we_have_needs_no_proof(
    world: World, east: World, config: VerifierConfig, store: ZkMetadataStore, s3client: Any
) -> None:
    """`public/default` replicates nowhere and the neighbour has no such topic: the
    metadata match decides, as without neighbours."""
    await world.ledger(9, data_meta())
    await world.ml([5], version=3)
    parts = await _parts(config, store, s3client, east)

    verdict = await parts.engine.verify(pdli(9, fence=1))

    assert verdict.decision is Decision.DELETE, verdict
