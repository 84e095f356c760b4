"""Two windows in which a ledger is unreferenced yet not free, on the real ZooKeeper.

- A schema ledger between its close and its locator write. `BookkeeperSchemaStorage.
  addNewSchemaEntryToStore` creates the ledger, adds the entry and calls
  `ledgerHandle.closeAsync()` before `putSchema` writes the locator (`createSchemaLocator` or
  `updateSchemaLocator`); releases before that close left the ledger OPEN until a broker
  restart, which the OPEN rule covers. So a CLOSED schema ledger no locator names may be that
  window: younger than the schema age window it is RETRY.
- A shadow topic created after the verifier's last shadow scan. `ShadowManagedLedgerImpl`
  copies its source's ledger list when the shadow is created, so a shadow created after a
  ledger left its source's list cannot list it; one created before may. The index is trusted
  only when its scan started after the ledger left the list (the later of the intent's
  `marked_at_ms` and the owner's last write); else RETRY and a scan is asked for.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from services.core.metrics import Metrics
from services.metadata.ledger_metadata import LedgerState
from services.metadata.pulsar_formats import SHADOW_SOURCE
from services.metadata.pulsar_stores import ManagedLedgers
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import TOPIC, World, data_meta, pdli, schema_meta
from tombstone.v1 import pending_delete_pb2 as pb

OLD = 1_000
SHADOW = "public/default/persistent/orders-shadow"


def _parts(config: VerifierConfig, store: ZkMetadataStore, s3client: Any, **changes: Any) -> Any:
    names = ManagedLedgers(store).managed_ledger_names
    return build(
        replace(config, **changes),
        MetadataZnodeStore(store),
        S3ObjectStore(s3client),
        VerifierMetrics(Metrics()),
        ml_names=names,
    )


async def test_a_young_closed_schema_ledger_is_retried(
    world: World, store: ZkMetadataStore, s3client: Any, config: VerifierConfig
) -> None:
    """CLOSED, unlisted, just created: RETRY `schema_too_young` for every source (the window
    is the writer's, not the intent's); once older than the window: DELETE."""
    parts = _parts(config, store, s3client, schema_min_age=timedelta(minutes=2))
    await world.schema([3])
    await world.ledger(7, schema_meta(), state=LedgerState.CLOSED)
    await world.ledger(8, schema_meta(), state=LedgerState.CLOSED, ctime=OLD)
    for source in (pb.BROKER, pb.OBSERVED, pb.OPERATOR):
        young = pdli(7, component=pb.SCHEMA_STORAGE, schema_id="public/default/orders", fence=0)
        young.source = source
        verdict = await parts.engine.verify(young)
        assert (verdict.decision, verdict.code) == (Decision.RETRY, "schema_too_young")
    old = pdli(8, component=pb.SCHEMA_STORAGE, schema_id="public/default/orders", fence=0)
    assert (await parts.engine.verify(old)).decision is Decision.DELETE


async def test_a_shadow_created_after_the_last_scan_still_protects(
    world: World, store: ZkMetadataStore, s3client: Any, config: VerifierConfig
) -> None:
    """The index was scanned, then the intent was recorded and a shadow created that still
    lists the ledger: RETRY `shadow_view_stale` (a scan is asked for), then, after a scan,
    `shadow_listed`; once the shadow drops it, DELETE."""
    parts = _parts(config, store, s3client, shadow_scan_interval=timedelta(minutes=5))
    await world.ml([2])
    await world.ledger(1, data_meta(), ctime=OLD)
    shadows = parts.shadows
    await shadows.scan()
    await asyncio.sleep(0.01)  # the intent comes after the scan started (ms clock)
    request = pdli(1, fence=0)
    request.marked_at_ms = int(time.time() * 1000)
    await world.ml([1], ml=SHADOW, properties={SHADOW_SOURCE: TOPIC})
    first = await parts.engine.verify(request)
    assert (first.decision, first.code) == (Decision.RETRY, "shadow_view_stale")
    await shadows.scan()
    second = await parts.engine.verify(request)
    assert (second.decision, second.code) == (Decision.RETRY, "shadow_listed")
    await world.ml([], ml=SHADOW, properties={SHADOW_SOURCE: TOPIC}, version=1)
    assert (await parts.engine.verify(request)).decision is Decision.DELETE


async def test_an_owner_written_after_the_intent_needs_a_newer_scan(
    world: World, store: ZkMetadataStore, s3client: Any, config: VerifierConfig
) -> None:
    """A broker's intent is recorded before the owner's write unlinks the ledger (phase 1,
    then the compare-and-set): the scan must also be newer than that write, whatever the
    intent's time says."""
    parts = _parts(config, store, s3client, shadow_scan_interval=timedelta(minutes=5))
    await world.ledger(1, data_meta(), ctime=OLD)
    request = pdli(1, fence=1)
    request.marked_at_ms = OLD
    await world.ml([1, 2])
    await parts.shadows.scan()
    await asyncio.sleep(0.01)
    await world.ml([2], version=1)  # the unlink lands after the scan started
    verdict = await parts.engine.verify(request)
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "shadow_view_stale")
    await parts.shadows.scan()
    assert (await parts.engine.verify(request)).decision is Decision.DELETE


async def test_a_stale_view_wakes_the_scan_loop_no_sooner_than_the_gap(
    world: World, store: ZkMetadataStore, s3client: Any, config: VerifierConfig
) -> None:
    """The loop scans at start, then sleeps its 5-minute interval; a verdict that needs a
    newer view wakes it, and the next scan follows (after the minimum gap), not five minutes
    later."""
    parts = _parts(config, store, s3client, shadow_scan_interval=timedelta(minutes=5))
    await world.ml([2])
    await world.ledger(1, data_meta(), ctime=OLD)
    shadows = parts.shadows
    loop = asyncio.create_task(shadows.run(timedelta(minutes=5), timedelta(seconds=0.5)))
    try:
        while shadows.scans < 1:  # noqa: ASYNC110 - the index exposes no event
            await asyncio.sleep(0.01)
        request = pdli(1, fence=0)
        request.marked_at_ms = int(time.time() * 1000) + 50
        await asyncio.sleep(0.1)
        asked = time.monotonic()
        assert (await parts.engine.verify(request)).code == "shadow_view_stale"
        while shadows.scans < 2:  # noqa: ASYNC110 - the index exposes no event
            await asyncio.sleep(0.01)
        waited = time.monotonic() - asked
        assert (await parts.engine.verify(request)).decision is Decision.DELETE
    finally:
        loop.cancel()
    assert shadows.requested_scans == 1
    assert waited < 60  # woken, not the 5-minute interval
