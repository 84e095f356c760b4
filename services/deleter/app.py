"""The deleter's lifecycle: open the verifier channel, the delete backends, the producers and
the consumers on the runner's exit stack, run the pool as a background loop, serve
`DeleterAdmin`, and on stop drain the pool before anything closes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass

import aiohttp
import structlog

from services.core.adaptive import Signal
from services.core.client import open_channel
from services.core.errors import Conflict
from services.core.grpc_server import ServiceRunner
from services.core.s3_client import s3_signal
from services.core.service_main import check_reachable
from services.deleter._verifier import GrpcVerdictSource
from services.deleter.admin import DeleterAdmin, Topics
from services.deleter.backends.bookie_http import BookieHttpDeleter
from services.deleter.backends.filesystem import FilesystemOffloadDeleter
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.s3 import S3OffloadDeleter, open_s3_deleter
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.config import DeleterConfig, Limits
from services.deleter.forged import ForgedLimiter
from services.deleter.handling import Backends, Handler
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import Dependency, OutageGate, Probe
from services.deleter.pool import DeleterPool, PoolSettings
from services.deleter.ports import BookKeeperDeleter, OffloadDeleter
from services.deleter.preview import (
    NoPublishing,
    PreviewSettler,
    PreviewTally,
    preview_backends,
    require_preview_subscription,
)
from services.deleter.servicer import METHOD_ROLES, SERVICE_NAME, DeleterAdminServicer
from services.deleter.startup import watch_ledgers_layout
from services.deleter.status_gauges import StatusGauges
from services.metadata.connect import (
    connect_bookkeeper_store,
    connect_pulsar_store,
    open_stores,
)
from services.metadata.errors import zookeeper_signal
from services.metadata.peer_settings import PeerSettings, Published, retry_budget
from services.metadata.zookeeper.secure import refuse_unsecured_if_zookeeper
from services.systopic._consumer import (
    ConsumerSettings,
    PulsarMessageSource,
    SubscriptionType,
    open_message_source,
)
from services.systopic._pulsar import open_intent_publisher
from services.systopic.admin import PulsarAdmin
from services.systopic.admin_auth import confirm_credentials, secured_admin
from services.systopic.ports import IntentPublisher, ProducerSettings
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Deleter:
    """The pieces `run` (and tests) assemble."""

    pool: DeleterPool
    admin: DeleterAdmin
    outage: OutageGate
    preview: PreviewTally | None = None
    """In a preview, its verdicts so far."""


async def run(config: DeleterConfig) -> None:
    async with ServiceRunner(
        name="deleter", grpc=config.grpc, metrics=config.metrics, method_roles=METHOD_ROLES
    ) as runner:
        await _join_peers(runner, config)
        # A broker that refuses connections ends the start now, not after the client's timeout.
        await check_reachable(pulsar=config.pulsar)
        metrics = DeleterMetrics(runner.metrics)
        metrics.preview.set(1 if config.preview else 0)
        # A refused credential ends the start now, with its reason, not as a client timeout.
        await confirm_credentials(
            config.admin_url,
            config.pulsar.security,
            config.pulsar.topic,
            failures=metrics.admin_failures,
        )
        deleter = await build(runner.resources, config, metrics)
        if config.preview:
            _log.warning(
                "deleter_preview", subscription=config.preview_subscription, deletes="nothing"
            )
        servicer = DeleterAdminServicer(deleter.admin)
        runner.add_servicer(_dl_grpc.add_DeleterAdminServicer_to_server, servicer, SERVICE_NAME)
        runner.add_background("pool", lambda: deleter.pool.run(runner.stopping))
        runner.add_background("health", lambda: follow_outages(deleter.outage, runner))
        gauges = StatusGauges(
            deleter.admin,
            metrics,
            pool_status=deleter.pool.status,
            interval=config.status_interval,
        )
        runner.add_background("status_gauges", lambda: gauges.run(runner.stopping))
        await runner.run()


async def follow_outages(outage: OutageGate, runner: ServiceRunner) -> None:
    """Health NOT_SERVING while work is paused on an outage, SERVING again once it resumes."""
    seen = outage.version
    while True:
        await runner.set_serving(not outage.paused)
        seen = await outage.wait_change(seen)


def published_settings(config: DeleterConfig) -> Published:
    """What the marker and the verifier must agree with (`services.metadata.peer_settings`)."""
    policy = config.retry
    budget = retry_budget(
        initial=policy.initial_delay,
        max_delay=policy.max_delay,
        multiplier=policy.multiplier,
        jitter=policy.jitter,
        retries=policy.max_retries,
    )
    return Published(
        service="deleter",
        instance=config.deleter_id,
        allowed_buckets=tuple(sorted(config.s3.allowed_buckets)),
        allowed_endpoints=tuple(sorted(config.s3.allowed_endpoints)),
        retry_budget_s=budget.total_seconds(),
    )


async def _join_peers(runner: ServiceRunner, config: DeleterConfig) -> None:
    """Publish the settings on their own session to Pulsar's metadata store (where Tombstone's
    znodes are); refuse to start beside a leaking peer."""
    zk = config.zookeeper
    store = await runner.resources.enter_async_context(connect_pulsar_store(zk))
    await refuse_unsecured_if_zookeeper(store, zk.security)  # before anything is written there
    board = PeerSettings(store, published_settings(config), metrics=runner.metrics)
    await board.join()
    runner.resources.push_async_callback(board.leave)
    runner.add_background("peer_settings", lambda: board.watch(runner.stopping))


async def build(
    stack: AsyncExitStack,
    config: DeleterConfig,
    metrics: DeleterMetrics,
    *,
    wrap_backends: Callable[[Backends], Backends] | None = None,
) -> Deleter:
    """Open every resource on `stack` (closed in reverse) and assemble pool and admin.

    `wrap_backends` lets a caller decorate the backends (fault-injection tests do).
    """
    http = await stack.enter_async_context(aiohttp.ClientSession())
    channel = open_channel(config.verifier)
    stack.push_async_callback(channel.close)
    verdicts = GrpcVerdictSource(
        channel, batch_max=config.verify_batch, max_concurrency=config.verify_concurrency
    )
    stack.push_async_callback(verdicts.aclose)
    bookkeeper = await _bookkeeper(stack, config, http, metrics)
    s3 = await _s3(stack, config, metrics)
    backends = Backends(
        bookkeeper=bookkeeper,
        s3=s3,
        filesystem=(
            FilesystemOffloadDeleter(config.filesystem_root) if config.filesystem_root else None
        ),
    )
    outage = OutageGate(_probes(verdicts, bookkeeper, s3), metrics=metrics, settings=config.outage)
    stack.push_async_callback(outage.aclose)
    stats = secured_admin(
        http, config.admin_url, config.pulsar.security, failures=metrics.admin_failures
    )
    preview = _preview(config, metrics)
    if preview is not None:
        backends = preview_backends(backends)
    if wrap_backends is not None:
        backends = wrap_backends(backends)
    sinks = await _sinks(stack, config, stats)
    sources = [
        await stack.enter_async_context(_open_source(config, topic))
        for topic in (config.pulsar.topic, config.pulsar.retry_topic)
    ]
    handler = Handler(
        verdicts=verdicts,
        backends=backends,
        retry_sink=sinks.retry,
        dead_letter_sink=sinks.dead_letter,
        policy=config.retry,
        max_hold=config.max_hold,
        metrics=metrics,
        outage=outage,
        # A preview dead-letters nothing: nothing to pace.
        forged=ForgedLimiter(config.forged_pace) if preview is None else None,
        preview=preview,
    )
    settings = PoolSettings(
        max_in_flight=config.max_in_flight,
        retry_max_in_flight=config.retry_max_in_flight,
        drain_timeout=config.drain_timeout,
    )
    pool = DeleterPool(handler, sources, settings=settings, metrics=metrics, outage=outage)
    tally = preview.tally if preview is not None else None
    admin = DeleterAdmin(
        topics=_topics(config),
        stats=stats,
        pool_status=pool.status,
        open_scan=lambda: _open_scan(config),
        replay_sink=sinks.replay,
        scan_max=config.dlq_scan_max,
        preview=tally,
    )
    return Deleter(pool, admin, outage, tally)


@dataclass(frozen=True)
class _Sinks:
    retry: IntentPublisher
    dead_letter: IntentPublisher
    replay: IntentPublisher


async def _sinks(stack: AsyncExitStack, config: DeleterConfig, admin: PulsarAdmin) -> _Sinks:
    """The producers of the retry, dead-letter and system topics. A preview has none: it
    checks instead that its subscription was made for it (it never creates one)."""
    if config.preview:
        await require_preview_subscription(
            admin,
            [config.pulsar.topic, config.pulsar.retry_topic],
            config.preview_subscription,
            config.pulsar.partitions,
        )
        return _Sinks(NoPublishing("retry"), NoPublishing("dead-letter"), NoPublishing("system"))
    sinks = _Sinks(
        retry=await _publisher(stack, config, config.pulsar.retry_topic, "retry"),
        dead_letter=await _publisher(stack, config, config.pulsar.dlq_topic, "dlq"),
        replay=await _publisher(stack, config, config.pulsar.topic, "replay"),
    )
    await _ensure_dead_letter_subscription(config)
    return sinks


def _preview(config: DeleterConfig, metrics: DeleterMetrics) -> PreviewSettler | None:
    if not config.preview:
        return None
    return PreviewSettler(
        PreviewTally(config.preview_subscription),
        policy=config.retry,
        max_redeliveries=config.max_redeliveries,
        metrics=metrics,
    )


def _probes(
    verdicts: GrpcVerdictSource,
    bookkeeper: BookKeeperDeleter | None,
    s3: OffloadDeleter | None,
) -> dict[Dependency, Probe]:
    """How each dependency is checked while it is out: a read of the ledgers root, a HEAD of
    an allowed bucket, and for the verifier its health plus both of those: a verifier that does
    not answer in time mostly waits on ZooKeeper or S3 itself (its health stays SERVING).
    A backend this deleter lacks (bookie HTTP, no bucket) has no probe: its outage, seen
    through the verifier, is tried again after an interval."""
    probes: dict[Dependency, Probe] = {}
    if isinstance(bookkeeper, ZooKeeperLedgerDeleter):
        probes[Dependency.ZOOKEEPER] = bookkeeper.probe
    if isinstance(s3, S3OffloadDeleter):
        probes[Dependency.S3] = s3.probe
    behind = list(probes.values())

    async def verifier() -> None:
        await verdicts.probe()
        for probe in behind:
            await probe()

    probes[Dependency.VERIFIER] = verifier
    return probes


def _topics(config: DeleterConfig) -> Topics:
    return Topics(
        system=config.pulsar.topic,
        retry=config.pulsar.retry_topic,
        dead_letter=config.pulsar.dlq_topic,
        subscription=config.reading_subscription,
        dead_letter_subscription=config.dlq_subscription,
        deleters_subscription=config.subscription,
    )


def _limits(
    limits: Limits,
    metrics: DeleterMetrics,
    resource: str,
    classify: Callable[[BaseException], Signal],
) -> BackendLimits:
    """A backend's limits, its current concurrency limit shown as a gauge."""
    backend = BackendLimits(
        concurrency=limits.adaptive(), per_second=limits.per_second, classify=classify
    )
    metrics.concurrency_limit.labels(resource).set_function(lambda: backend.limiter.limit)
    return backend


async def _bookkeeper(
    stack: AsyncExitStack,
    config: DeleterConfig,
    http: aiohttp.ClientSession,
    metrics: DeleterMetrics,
) -> BookKeeperDeleter | None:
    limits = _limits(config.zookeeper_limits, metrics, "zookeeper", zookeeper_signal)
    if config.bookkeeper_backend == "bookie-http":
        return BookieHttpDeleter(http, base_url=config.bookie_http_url, limits=limits)
    if config.bookkeeper_backend == "none":
        return None
    # Ledger metadata is BookKeeper's: in its own store when bookkeeper.conf names one.
    zk = config.zookeeper
    if zk.stores.split:
        # Pulsar's session too: its PIP-454 migration record governs these deletes.
        _, store = await open_stores(stack, zk)
    else:
        store = await stack.enter_async_context(connect_bookkeeper_store(zk))
    pulsar = connect_pulsar_store(zk) if zk.stores.split else None
    layout = await watch_ledgers_layout(stack, store, config.ledgers_root, pulsar=pulsar)
    deleter = ZooKeeperLedgerDeleter(
        store,
        locations=lambda: layout.current,
        limits=limits,
        batch_max=config.zookeeper_delete_batch,
    )
    stack.push_async_callback(deleter.aclose)  # the last sweep, before the session closes
    return deleter


async def _s3(
    stack: AsyncExitStack, config: DeleterConfig, metrics: DeleterMetrics
) -> OffloadDeleter | None:
    if not config.s3.allowed_buckets:
        return None  # no bucket may be touched: offload PDLIs dead-letter with that reason
    limits = _limits(config.s3_limits, metrics, "s3", s3_signal)
    return await stack.enter_async_context(
        open_s3_deleter(
            config.s3,
            limits=limits,
            batch_max=config.s3_batch_keys,
            confirm_by_listing=config.s3_confirm_by_listing,
        )
    )


async def _publisher(
    stack: AsyncExitStack, config: DeleterConfig, topic: str, role: str
) -> IntentPublisher:
    # A unique producer name: two deleters must never share one (the broker would refuse or
    # deduplicate across them); duplicates after a restart are harmless here.
    name = f"{config.deleter_id}-{role}-{uuid.uuid4().hex[:8]}"
    return await stack.enter_async_context(
        open_intent_publisher(config.pulsar, ProducerSettings(producer_name=name), topic=topic)
    )


def _open_source(
    config: DeleterConfig, topic: str
) -> AbstractAsyncContextManager[PulsarMessageSource]:
    settings = ConsumerSettings(
        subscription=config.reading_subscription,
        receiver_queue_size=config.receiver_queue_size,
        negative_ack_delay=config.release_delay,
        # A preview's client must not move anything to the real dead-letter topic; it counts
        # redeliveries itself (`PreviewSettler`).
        dead_letter_topic=None if config.preview else config.pulsar.dlq_topic,
        max_redeliveries=config.max_redeliveries,
        dead_letter_subscription=None if config.preview else config.dlq_subscription,
        consumer_name=f"{config.deleter_id}-{uuid.uuid4().hex[:8]}",
    )
    return open_message_source(config.pulsar, topic, settings)


def _open_scan(config: DeleterConfig) -> AbstractAsyncContextManager[PulsarMessageSource]:
    settings = ConsumerSettings(
        subscription=config.dlq_subscription,
        subscription_type=SubscriptionType.EXCLUSIVE,
        receiver_queue_size=config.receiver_queue_size,
    )
    return open_message_source(config.pulsar, config.pulsar.dlq_topic, settings)


async def _ensure_dead_letter_subscription(config: DeleterConfig) -> None:
    """Create the dead-letter subscription (at the earliest message) before anything is sent
    there, so that no dead letter is published to a topic nobody retains it for."""
    try:
        async with _open_scan(config):
            pass
    except Conflict:
        pass  # another deleter is scanning it: it exists
