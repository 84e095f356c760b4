"""The real parts wired in one process for end-to-end tests: ZooKeeper, moto S3, the devstack
broker, the verifier and marker services' own code, and the deleter."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel, ClusterSpec, OrphanPlan
from devstack.simulator.run import simulate_into
from devstack.simulator.s3 import open_object_stores
from devstack.simulator.writer import write_cluster as write_into
from devstack.zookeeper import ZooKeeperServer
from services.core.config import (
    ClientConfig,
    GrpcServerConfig,
    PulsarConfig,
    S3Config,
)
from services.deleter.admin import Status
from services.deleter.app import Deleter, build
from services.deleter.config import DeleterConfig
from services.deleter.handling import Backends
from services.deleter.metrics import DeleterMetrics
from services.marker.app import build_marker
from services.marker.config import MarkerConfig
from services.marker.marking import Marker
from services.marker.metrics import MarkerMetrics
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.connect import connect_pulsar_store
from services.systopic import IntentPublisher, ProducerSettings, open_intent_publisher
from services.systopic.setup import SetupPlan, prepare_topics
from services.verifier.app import open_verifier
from services.verifier.config import VerifierConfig
from services.verifier.offload import OffloadPolicy
from tests.helpers import assert_eventually
from tests.store_kinds import StoreKind, store_config
from tombstone.v1 import pending_delete_pb2 as _pd

SYSTEM = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 2
BUCKET = "pulsar-offload"
CLUSTER = "standalone"
SPEC = ClusterSpec(
    seed=3,
    tenants=1,
    namespaces_per_tenant=2,
    topics_per_namespace=3,
    ledgers_per_topic=(3, 5),
    cursors_per_topic=(1, 2),
    offloaded_share=0.6,
    bookkeeper_deleted_share=0.5,
    orphans=OrphanPlan(),
    bucket=BUCKET,
    cluster_name=CLUSTER,
)


SMALL_SPEC = replace(SPEC, namespaces_per_tenant=1, ledgers_per_topic=(3, 4), seed=5)


def pulsar_config(broker: PulsarBrokerProcess) -> PulsarConfig:
    return PulsarConfig(
        service_url=broker.service_url,
        topic=SYSTEM,
        retry_topic=f"{SYSTEM}-RETRY",
        dlq_topic=f"{SYSTEM}-DLQ",
        partitions=PARTITIONS,
        operation_timeout=timedelta(seconds=10),
    )


def create_topics(broker: PulsarBrokerProcess) -> None:
    prepare_topics(SetupPlan.for_topic(broker.admin_url, SYSTEM, PARTITIONS))


def s3_config(s3: S3Server, endpoint: str | None = None) -> S3Config:
    settings = s3.client_config()
    return S3Config(
        endpoint_url=endpoint or settings["endpoint_url"],
        region=settings["region_name"],
        access_key_id=settings["aws_access_key_id"],
        secret_access_key=settings["aws_secret_access_key"],
        allowed_buckets=frozenset({BUCKET}),
    )


async def write_cluster(
    zk: ZooKeeperServer | StoreKind, s3: S3Server, spec: ClusterSpec = SPEC
) -> ClusterModel:
    """`spec`'s cluster in the test's metadata store and S3."""
    if isinstance(zk, ZooKeeperServer):
        return await simulate_into(spec, zookeeper=zk.address, s3_config=s3.client_config())
    async with (
        zk.open() as store,
        open_object_stores(s3.client_config(), None) as objects,
    ):
        return await write_into(spec, store=store, s3_client=objects)


@asynccontextmanager
async def running_verifier(
    zk: ZooKeeperServer | StoreKind,
    s3: S3Server,
    filesystem_bases: frozenset[str] = frozenset(),
    *,
    port: int = 0,
    **overrides: Any,
) -> AsyncIterator[str]:
    """A verifier on `port` (0: a free one; `overrides` replace config fields); yields its
    address."""
    config = VerifierConfig(
        grpc=GrpcServerConfig(port=port),
        zookeeper=store_config(zk),
        s3=s3_config(s3),
        offload=OffloadPolicy(
            allowed_buckets=frozenset({BUCKET}),
            cluster_name=CLUSTER,
            allowed_filesystem_bases=filesystem_bases,
        ),
        reconciler_min_age=timedelta(0),
        # One machine, one clock; scans asked for by fresh intents come quickly, so a test's
        # drain does not wait on the production gap (the rule itself is exercised as is).
        shadow_clock_allowance=timedelta(0),
        shadow_scan_min_gap=timedelta(milliseconds=200),
        # The cluster is written just before the trims: its schema ledgers are seconds old.
        schema_min_age=timedelta(0),
    )
    config = replace(config, **overrides)
    async with open_verifier(config) as (runner, parts):
        await runner.start()
        serving = asyncio.create_task(runner.run())  # background loops (shadow index...)
        shadows = parts.shadows
        if shadows is not None:

            async def ready() -> None:
                assert shadows.ready

            await assert_eventually(ready, timeout=30)
        try:
            yield f"127.0.0.1:{runner.port}"
        finally:
            runner.request_stop()
            await serving


@asynccontextmanager
async def running_marker(
    zk: ZooKeeperServer | StoreKind,
    broker: PulsarBrokerProcess,
    verifier: str | None,
    wrap_publisher: Callable[[IntentPublisher], IntentPublisher] | None = None,
    **settings: Any,
) -> AsyncIterator[Marker]:
    config = MarkerConfig(
        zookeeper=store_config(zk),
        pulsar=pulsar_config(broker),
        verifier=ClientConfig(verifier) if verifier else None,
        marker_id="e2e-marker",
        cluster=CLUSTER,
        delivery_delay=timedelta(milliseconds=200),
        retry_window=timedelta(seconds=5),
    )
    config = replace(config, **settings)
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(connect_pulsar_store(config.zookeeper))
        publisher: IntentPublisher = await stack.enter_async_context(
            open_intent_publisher(config.pulsar, ProducerSettings(producer_name=config.marker_id))
        )
        if wrap_publisher is not None:
            publisher = wrap_publisher(publisher)
        yield await build_marker(stack, config, MarkerMetrics(), store=store, publisher=publisher)


def deleter_config(
    zk: ZooKeeperServer | StoreKind,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    verifier: str,
    s3_settings: S3Config | None = None,
    **overrides: Any,
) -> DeleterConfig:
    config = DeleterConfig(
        zookeeper=replace(store_config(zk), operation_timeout=timedelta(seconds=3)),
        pulsar=pulsar_config(broker),
        s3=s3_settings or s3_config(s3),
        verifier=ClientConfig(verifier),
        deleter_id="e2e",
        admin_url=broker.admin_url,
        drain_timeout=timedelta(seconds=3),
        release_delay=timedelta(milliseconds=200),
    )
    from services.systopic.retry import RetryPolicy

    config = replace(
        config,
        retry=RetryPolicy(
            initial_delay=timedelta(milliseconds=100), max_delay=timedelta(seconds=1), max_retries=4
        ),
    )
    return replace(config, **overrides)


@dataclass
class RunningDeleter:
    deleter: Deleter
    task: asyncio.Task[None]
    stop: asyncio.Event
    metrics: DeleterMetrics


@asynccontextmanager
async def running_deleter(
    config: DeleterConfig, wrap_backends: Callable[[Backends], Backends] | None = None
) -> AsyncIterator[RunningDeleter]:
    async with AsyncExitStack() as stack:
        metrics = DeleterMetrics()
        deleter = await build(stack, config, metrics, wrap_backends=wrap_backends)
        stop = asyncio.Event()
        task = asyncio.create_task(deleter.pool.run(stop))
        try:
            yield RunningDeleter(deleter, task, stop, metrics)
        finally:
            stop.set()
            await task


@asynccontextmanager
async def running_e2e_deleter(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str
) -> AsyncIterator[RunningDeleter]:
    """A deleter on the e2e settings (`deleter_config`) against these servers."""
    async with running_deleter(deleter_config(zk, s3, broker, verifier)) as running:
        yield running


async def run_deleter_until_drained(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str
) -> Status:
    """Run an e2e deleter until the topics are drained and nothing is in process, then stop
    it; returns its status at that point."""
    async with running_e2e_deleter(zk, s3, broker, verifier) as running:
        return await drained(running.deleter)


async def mark_trims(marker: Marker, model: ClusterModel) -> dict[int, set[int]]:
    """Trim every topic through the marker: all but its current ledger. Returns the ledgers
    marked, by tier (LEDGER / OFFLOAD_LEDGER)."""
    marked: dict[int, set[int]] = {_pd.LEDGER: set(), _pd.OFFLOAD_LEDGER: set()}
    for ml in model.managed_ledgers.values():
        ids = ml.ledger_ids[:-1]
        if not ids or ml.shadow_source:
            continue
        owner = resolve_owner(
            _pd.MANAGED_LEDGER, topic_name="", ml_name=ml.name, cursor_name="", schema_id=""
        )
        result = await marker.mark(MarkRequest(owner=owner, ledger_ids=tuple(ids)))
        for ledger_id, tiers in result.marked:
            for tier in tiers:
                marked[tier].add(ledger_id)
    return marked


async def mark_cursor_and_schema_trims(marker: Marker, model: ClusterModel) -> set[int]:
    """Every cursor moves its position into its znode and its ledger is marked, left OPEN as
    Pulsar leaves it: `ManagedCursorImpl.asyncDeleteCursorLedger` (and `switchToNewLedger`
    for a switch) writes the cursor znode, then deletes the old ledger by id without closing
    it. Every schema with several versions drops its oldest version's ledger. Returns the
    ledgers marked (all LEDGER tier)."""
    marked: set[int] = set()
    for cursor in model.cursors.values():
        if cursor.cursors_ledger_id < 0:
            continue
        owner = resolve_owner(
            _pd.MANAGED_CURSOR,
            topic_name="",
            ml_name=cursor.ml_name,
            cursor_name=cursor.name,
            schema_id="",
        )
        request = MarkRequest(owner=owner, ledger_ids=(cursor.cursors_ledger_id,))
        result = await marker.mark(request)
        marked.update(ledger_id for ledger_id, _ in result.marked)
    for schema in model.schemas.values():
        ids = schema.ledger_ids
        if len(ids) < 2 or ids.count(ids[0]) > 1:
            continue
        owner = resolve_owner(
            _pd.SCHEMA_STORAGE,
            topic_name="",
            ml_name="",
            cursor_name="",
            schema_id=schema.schema_id,
        )
        result = await marker.mark(MarkRequest(owner=owner, ledger_ids=(ids[0],)))
        marked.update(ledger_id for ledger_id, _ in result.marked)
    return marked


async def drained(deleter: Deleter) -> Status:
    """Wait until the system and retry topics are drained and nothing is in process."""

    async def check() -> Status:
        status = await deleter.admin.status()
        assert (status.estimated_in_flight, status.in_process) == (0, 0)
        return status

    return await assert_eventually(check, timeout=60, interval=0.3)


def unsigned_pdli(ledger_id: int, owner: str, **fields: object) -> _pd.PendingDeleteLedgerInfo:
    """A BookKeeper-tier PDLI for `owner`'s ML, fence token 0, as nobody's marker sends it
    (forged, replayed or written by hand); `fields` override any field."""
    base = {
        "ledger_id": ledger_id,
        "ledger_type": _pd.LEDGER,
        "component": _pd.MANAGED_LEDGER,
        "managed_ledger_name": owner,
        "fence_token": 0,
        "cluster": CLUSTER,
    }
    return _pd.PendingDeleteLedgerInfo(**{**base, **fields})  # type: ignore[arg-type]
