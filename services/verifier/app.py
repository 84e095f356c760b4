"""Lifecycle of the verifier service: wire the parts, serve, stop (via `ServiceRunner`)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

import structlog

from services.core.adaptive import AdaptiveLimiter
from services.core.config import CONFIGURATION_STORE, SHARED_CLUSTERS, S3Config
from services.core.grpc_server import ServiceRunner, follow_session
from services.core.s3_client import s3_signal
from services.core.s3_locations import default_location
from services.metadata.connect import connect_store, open_stores
from services.metadata.errors import zookeeper_signal
from services.metadata.layout import LayoutWatch, confirm_ledgers_root
from services.metadata.paths import LedgerLocations
from services.metadata.peer_settings import PeerSettings, Published
from services.metadata.pulsar_stores import ManagedLedgers
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.secure import refuse_unsecured_if_zookeeper, roots_of
from services.verifier._s3 import open_s3
from services.verifier.believed import BelievedSet
from services.verifier.clusters import ClusterScope, Neighbour
from services.verifier.config import VerifierConfig
from services.verifier.decision import DecisionEngine, DecisionPolicy
from services.verifier.limited import LimitedObjectStore, LimitedZnodeStore
from services.verifier.metrics import CountingObjectStore, CountingZnodeStore, VerifierMetrics
from services.verifier.offload import OffloadInspector, OffloadPolicy
from services.verifier.owners import OwnerCache
from services.verifier.ports import ObjectStore, ZnodeStore
from services.verifier.servicer import METHOD_ROLES, SERVICE_NAME, VerifierServicer
from services.verifier.shadows import ShadowIndex
from services.verifier.signatures import SignatureGate
from services.verifier.store_adapter import MetadataZnodeStore
from tombstone.v1 import verifier_pb2_grpc as _grpc

_log = structlog.get_logger("tombstone.verifier")


def located(policy: OffloadPolicy, s3: S3Config) -> OffloadPolicy:
    """`policy` with the locations of `s3`, the config the object store's clients come from:
    the two can never name different configured endpoints."""
    return dataclasses.replace(
        policy, default_location=default_location(s3), allowed_endpoints=s3.allowed_endpoints
    )


@dataclass
class VerifierParts:
    """The wired domain objects (tests and the benchmark use them directly)."""

    engine: DecisionEngine
    believed: BelievedSet
    owners: OwnerCache
    shadows: ShadowIndex | None
    metrics: VerifierMetrics


def build(
    config: VerifierConfig,
    znodes: ZnodeStore,
    objects: ObjectStore,
    metrics: VerifierMetrics,
    *,
    ml_names: Callable[[], AsyncIterator[str]] | None = None,
    locations: Callable[[], LedgerLocations] | None = None,
    neighbours: Mapping[str, ZnodeStore] | None = None,
    configuration: ZnodeStore | None = None,
    ledgers: ZnodeStore | None = None,
) -> VerifierParts:
    """Wire the decision engine and its collaborators on the given ports.

    `locations` gives the ledgers root and layout in force (`LayoutWatch.current`); without
    it, the configured root under the hybrid layout (`LAYOUT` is still confirmed per read).
    `neighbours` are the declared clusters' metadata stores by name, `configuration` the
    configuration store when it is not `znodes`, `ledgers` BookKeeper's store (ledger
    znodes, `LAYOUT`) when it is not `znodes`.
    """
    fixed = LedgerLocations(config.ledgers_root)
    locations = locations or (lambda: fixed)
    counted = CountingZnodeStore(
        znodes, metrics, ledgers_root=config.ledgers_root, believed_root=config.believed.root
    )
    counted_ledgers = counted
    if ledgers is not None:
        counted_ledgers = CountingZnodeStore(
            ledgers, metrics, ledgers_root=config.ledgers_root, believed_root=config.believed.root
        )
    owners = OwnerCache(counted, max_entries=config.owner_cache_size)
    owners.on_read = metrics.on_cache_lookup
    believed = BelievedSet(counted, config.believed)
    shadows = None
    if ml_names is not None and config.shadow_scan_interval.total_seconds() > 0:
        shadows = ShadowIndex(counted, ml_names)
    scope = ClusterScope(
        cluster=config.cluster_name,
        configuration=configuration or counted,
        neighbours=[
            Neighbour(name, OwnerCache(store, max_entries=config.owner_cache_size))
            for name, store in (neighbours or {}).items()
        ],
        deleted_namespaces=config.deleted_namespaces,
        unshared_clusters=config.unshared_clusters,
    )
    engine = DecisionEngine(
        store=counted_ledgers,
        owners=owners,
        believed=believed,
        offload=OffloadInspector(
            CountingObjectStore(objects, metrics), located(config.offload, config.s3)
        ),
        shadows=shadows,
        policy=DecisionPolicy(
            locations=locations,
            reconciler_min_age=config.reconciler_min_age,
            open_ledger_age=config.open_ledger_age,
            schema_min_age=config.schema_min_age,
            property_ledger_min_age=config.property_ledger_min_age,
            shadow_margin=config.shadow_clock_allowance,
            incarnation_allowance=config.incarnation_clock_allowance,
        ),
        scope=scope,
        observe=metrics.observe,
        signatures=SignatureGate(
            config.trusted_keys,
            require_signed=config.require_signed,
            on_checked=metrics.on_signature,
        ),
    )
    metrics.believed_entries.set_function(lambda: len(believed))
    metrics.believed_batches.set_function(lambda: believed.batches)
    metrics.believed_buckets.set_function(lambda: believed.buckets)
    metrics.cache_entries.set_function(lambda: len(owners))
    return VerifierParts(engine, believed, owners, shadows, metrics)


def limited(
    config: VerifierConfig,
    znodes: ZnodeStore,
    objects: ObjectStore,
    metrics: VerifierMetrics,
    *,
    ledgers: ZnodeStore | None = None,
) -> tuple[ZnodeStore, ObjectStore, ZnodeStore | None]:
    """The stores with their reads under adaptive limits, shown as gauges. BookKeeper's
    store (`ledgers`, when it is one of its own) shares the metadata-store limit: the
    setting bounds what the verifier asks of metadata stores, whichever holds the znode."""
    zookeeper = AdaptiveLimiter(config.zookeeper_concurrency, classify=zookeeper_signal)
    s3 = AdaptiveLimiter(config.s3_concurrency, classify=s3_signal)
    metrics.concurrency_limit.labels("zookeeper").set_function(lambda: zookeeper.limit)
    metrics.concurrency_limit.labels("s3").set_function(lambda: s3.limit)
    limited_ledgers = None if ledgers is None else LimitedZnodeStore(ledgers, zookeeper)
    return LimitedZnodeStore(znodes, zookeeper), LimitedObjectStore(objects, s3), limited_ledgers


@dataclass(frozen=True)
class _Stores:
    """The verifier's metadata-store sessions."""

    pulsar: MetadataStore
    bookkeeper: MetadataStore
    """The same object as `pulsar` unless BookKeeper's metadata is in a store of its own."""
    neighbours: dict[str, ZnodeStore]
    configuration: ZnodeStore | None


async def _open_stores(stack: contextlib.AsyncExitStack, config: VerifierConfig) -> _Stores:
    """Pulsar's and BookKeeper's stores, the neighbours' and the configuration store, each
    session on `stack`."""
    zk = config.zookeeper
    pulsar, bookkeeper = await open_stores(stack, zk)
    neighbours: dict[str, ZnodeStore] = {
        cluster.name: MetadataZnodeStore(
            await stack.enter_async_context(
                connect_store(zk, cluster.store, setting=SHARED_CLUSTERS.name, read_only=True)
            )
        )
        for cluster in config.shared_clusters
    }
    configuration = None
    if config.configuration_store is not None:
        configuration = MetadataZnodeStore(
            await stack.enter_async_context(
                connect_store(
                    zk,
                    config.configuration_store,
                    setting=CONFIGURATION_STORE.name,
                    read_only=True,
                )
            )
        )
    return _Stores(pulsar, bookkeeper, neighbours, configuration)


def _ledger_znodes(stores: _Stores) -> ZnodeStore | None:
    """BookKeeper's store as the verifier reads it; None when it is Pulsar's (one session).
    Pulsar's session is synced after each ledger read, so that the owner looked up next is
    at least as new as the ledger read, as on one session (docs/verifier.md)."""
    if stores.bookkeeper is stores.pulsar:
        return None
    return MetadataZnodeStore(stores.bookkeeper, sync_after_reads=stores.pulsar)


def published_settings(config: VerifierConfig) -> Published:
    """What the marker and the deleter must agree with (`services.metadata.peer_settings`)."""
    return Published(
        service="verifier",
        instance=f"verifier-{socket.gethostname()}-{os.getpid()}",
        default_bucket=config.offload.default_bucket,
        allowed_buckets=tuple(sorted(config.offload.allowed_buckets)),
        allowed_endpoints=tuple(sorted(config.s3.allowed_endpoints)),
        cluster=config.cluster_name,
    )


@contextlib.asynccontextmanager
async def open_verifier(
    config: VerifierConfig, *, handle_signals: bool = False
) -> AsyncIterator[tuple[ServiceRunner, VerifierParts]]:
    """A started verifier (gRPC bound, background loops registered); shut down on exit."""
    async with ServiceRunner(
        name="verifier",
        grpc=config.grpc,
        metrics=config.metrics,
        method_roles=METHOD_ROLES,
        handle_signals=handle_signals,
    ) as runner:
        zk = config.zookeeper
        stores = await _open_stores(runner.resources, config)
        store = stores.pulsar
        ledgers = stores.bookkeeper
        located = await confirm_ledgers_root(ledgers, config.ledgers_root, pulsar=store)
        layout = LayoutWatch(ledgers, located)
        await refuse_unsecured_if_zookeeper(store, zk.security, roots_of(config.believed.root))
        board = PeerSettings(store, published_settings(config), metrics=runner.metrics)
        await board.join()  # refuses to start beside a peer whose settings would leak
        runner.resources.push_async_callback(board.leave)
        runner.add_background("peer_settings", lambda: board.watch(runner.stopping))
        s3 = await runner.resources.enter_async_context(open_s3(config.s3))
        metrics = VerifierMetrics(runner.metrics)
        znodes, objects, ledger_znodes = limited(
            config, MetadataZnodeStore(store), s3, metrics, ledgers=_ledger_znodes(stores)
        )
        parts = build(
            config,
            znodes,
            objects,
            metrics,
            ml_names=ManagedLedgers(store).managed_ledger_names,
            locations=lambda: layout.current,
            neighbours=stores.neighbours,
            configuration=stores.configuration,
            ledgers=ledger_znodes,
        )
        runner.add_background("ledgers_layout", layout.run)
        # Without its ZooKeeper session every verdict would be RETRY: not ready meanwhile.
        runner.add_background("readiness", lambda: follow_session(runner, "zookeeper", store))
        if ledgers is not store:
            runner.add_background(
                "bookkeeper_readiness",
                lambda: follow_session(runner, "bookkeeper_metadata", ledgers),
            )
        servicer = VerifierServicer(
            parts.engine, parts.believed, max_batch=config.max_batch, max_believe=config.max_believe
        )
        runner.add_servicer(_grpc.add_VerifierServicer_to_server, servicer, SERVICE_NAME)
        _log.info(
            "signature_policy",
            trusted_keys=list(config.trusted_keys.key_ids),
            require_signed=config.require_signed,
        )
        runner.resources.callback(parts.believed.close)
        runner.add_background("believed_set", parts.believed.maintain)
        shadows = parts.shadows
        if shadows is not None:
            interval = config.shadow_scan_interval
            gap = config.shadow_scan_min_gap
            runner.add_background("shadow_index", lambda: shadows.run(interval, gap))
        yield runner, parts


async def serve(config: VerifierConfig) -> None:
    """Run until SIGTERM/SIGINT, then drain and stop."""
    async with open_verifier(config, handle_signals=True) as (runner, _parts):
        await runner.run()
