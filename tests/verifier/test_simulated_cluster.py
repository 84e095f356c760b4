"""Every planted orphan and look-alike of a simulated cluster gets the right verdict."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from devstack.s3 import S3Server
from devstack.simulator.model import ClusterModel, LedgerKind, OrphanKind, Planted
from devstack.simulator.s3 import open_object_store
from devstack.simulator.spec import ClusterSpec, OrphanPlan
from devstack.simulator.writer import write_cluster
from services.core.metrics import Metrics
from services.metadata.offload import parse_object_key
from services.metadata.pulsar_stores import ManagedLedgers
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, SkipReason
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import pdli
from tombstone.v1 import pending_delete_pb2 as pb

SPEC = ClusterSpec(
    seed=7, tenants=1, namespaces_per_tenant=2, topics_per_namespace=3, orphans=OrphanPlan.some(1)
)
EXPECTED = {
    OrphanKind.UNLISTED_DATA: (Decision.DELETE, None),
    OrphanKind.DELETED_TOPIC: (Decision.DELETE, None),
    OrphanKind.STALE_CURSOR: (Decision.DELETE, None),
    OrphanKind.UNLISTED_SCHEMA: (Decision.DELETE, None),
    OrphanKind.UNREFERENCED_OFFLOAD: (Decision.DELETE, None),
    OrphanKind.BK_AFTER_OFFLOAD: (Decision.DELETE, None),
    # An unlisted OPEN ledger newer than its ML's list may be a rollover in creation
    # (ManagedLedgerImpl creates the ledger before the CAS that lists it): RETRY, not SKIP.
    OrphanKind.YOUNG: (Decision.RETRY, None),
    OrphanKind.NO_PULSAR_METADATA: (Decision.SKIP, SkipReason.MISMATCH),
    # ShadowManagedLedgerImpl drops the ledger from the shadow's copy later: "not yet".
    OrphanKind.SHADOW_REFERENCED: (Decision.RETRY, None),
    OrphanKind.OTHER_CLUSTER_OBJECTS: (Decision.SKIP, SkipReason.MISMATCH),
}


def ledger_pdli(model: ClusterModel, ledger_id: int, ml_hint: str) -> pb.PendingDeleteLedgerInfo:
    """The PDLI a marker (or reconciler) would send for this ledger's BookKeeper copy."""
    ledger = model.ledgers[ledger_id]
    if ledger.kind is LedgerKind.SCHEMA:
        return pdli(ledger_id, component=pb.SCHEMA_STORAGE, schema_id=ledger.owner)
    if ledger.kind is LedgerKind.CURSOR:
        return pdli(
            ledger_id, component=pb.MANAGED_CURSOR, ml=ledger.owner, cursor=ledger.cursor or ""
        )
    return pdli(ledger_id, ml=ledger.owner or ml_hint)


def objects_pdli(model: ClusterModel, planted: Planted) -> pb.PendingDeleteLedgerInfo:
    head = model.objects[planted.object_keys[0]]
    parsed = parse_object_key(head.key)
    return pdli(
        parsed.ledger_id,
        tier=pb.OFFLOAD_LEDGER,
        uuid=parsed.uuid,
        ml=head.ml_name,
        bucket=head.bucket,
    )


@pytest.mark.parametrize("batch", [False, True], ids=["verify", "verify_batch"])
async def test_planted_orphans_and_look_alikes(
    store: Any, s3: S3Server, s3client: Any, config: VerifierConfig, batch: bool
) -> None:
    """Alone or all in one batch: deletable orphans get DELETE; look-alikes (young, foreign,
    shadow-listed, another cluster's objects) never do (young and shadow-listed ones are
    RETRY, never acknowledged); every referenced ledger stays IN_USE."""
    async with open_object_store(s3.client_config()) as writer_s3:
        model = await write_cluster(SPEC, store=store, s3_client=writer_s3)
    policy = replace(config.offload, allowed_buckets=frozenset({SPEC.bucket}))
    cfg = replace(config, offload=policy, shadow_scan_interval=timedelta(minutes=5))
    names = ManagedLedgers(store).managed_ledger_names
    objects = S3ObjectStore(s3client)
    parts = build(
        cfg, MetadataZnodeStore(store), objects, VerifierMetrics(Metrics()), ml_names=names
    )
    assert parts.shadows is not None
    await parts.shadows.scan()

    async def decide(requests: list[pb.PendingDeleteLedgerInfo]) -> list[Any]:
        if batch:
            return await parts.engine.verify_batch(requests)
        return [await parts.engine.verify(request) for request in requests]

    # A foreign ledger's PDLI has to name some topic: any existing one will do.
    any_ml = next(iter(model.managed_ledgers))
    requests = []
    for planted in model.planted:
        if planted.object_keys and planted.kind is not OrphanKind.BK_AFTER_OFFLOAD:
            requests.append(objects_pdli(model, planted))
        else:
            requests.append(ledger_pdli(model, planted.ledger_id or 0, planted.ml_name or any_ml))
    actual, expected = {}, {}
    for planted, verdict in zip(model.planted, await decide(requests), strict=True):
        actual[planted.kind] = (verdict.decision, verdict.skip_reason)
        expected[planted.kind] = EXPECTED[planted.kind]
    # Listed with `complete && bookkeeperDeleted`, a BK copy is a leftover (planted above).
    leftovers = {p.ledger_id for p in model.planted_of(OrphanKind.BK_AFTER_OFFLOAD)}
    referenced = await decide(
        [
            ledger_pdli(model, led.ledger_id, any_ml)
            for led in model.bookkeeper_ledgers()
            if led.referenced and led.ledger_id not in leftovers
        ]
    )
    assert actual == expected
    # Referenced by a shadow topic only (its copy of the source's list): RETRY, never SKIP.
    outcomes = {
        (v.decision, v.skip_reason, v.code if v.decision is Decision.RETRY else "")
        for v in referenced
    }
    assert outcomes <= {
        (Decision.SKIP, SkipReason.IN_USE, ""),
        (Decision.RETRY, None, "shadow_listed"),
    }
    assert (Decision.SKIP, SkipReason.IN_USE, "") in outcomes
