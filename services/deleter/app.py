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

from services.core.client import open_channel
from services.core.errors import Conflict
from services.core.grpc_server import ServiceRunner
from services.deleter._pulsar_admin import PulsarTopicStats
from services.deleter._verifier import GrpcVerdictSource
from services.deleter.admin import DeleterAdmin, Topics
from services.deleter.backends.bookie_http import BookieHttpDeleter
from services.deleter.backends.filesystem import FilesystemOffloadDeleter
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.s3 import open_s3_deleter
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.config import DeleterConfig
from services.deleter.handling import Backends, Handler
from services.deleter.metrics import DeleterMetrics
from services.deleter.pool import DeleterPool, PoolSettings
from services.deleter.ports import BookKeeperDeleter, OffloadDeleter
from services.deleter.servicer import METHOD_ROLES, SERVICE_NAME, DeleterAdminServicer
from services.deleter.startup import watch_ledgers_layout
from services.metadata.zk_store import ZkMetadataStore
from services.systopic._consumer import (
    ConsumerSettings,
    PulsarMessageSource,
    SubscriptionType,
    open_message_source,
)
from services.systopic._pulsar import open_intent_publisher
from services.systopic.ports import IntentPublisher, ProducerSettings
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Deleter:
    """The pieces `run` (and tests) assemble."""

    pool: DeleterPool
    admin: DeleterAdmin


async def run(config: DeleterConfig) -> None:
    async with ServiceRunner(
        name="deleter", grpc=config.grpc, metrics=config.metrics, method_roles=METHOD_ROLES
    ) as runner:
        metrics = DeleterMetrics(runner.metrics)
        deleter = await build(runner.resources, config, metrics)
        servicer = DeleterAdminServicer(deleter.admin)
        runner.add_servicer(_dl_grpc.add_DeleterAdminServicer_to_server, servicer, SERVICE_NAME)
        runner.add_background("pool", lambda: deleter.pool.run(runner.stopping))
        await runner.run()


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
    backends = Backends(
        bookkeeper=await _bookkeeper(stack, config, http),
        s3=await _s3(stack, config),
        filesystem=(
            FilesystemOffloadDeleter(config.filesystem_root) if config.filesystem_root else None
        ),
    )
    if wrap_backends is not None:
        backends = wrap_backends(backends)
    retry_sink = await _publisher(stack, config, config.pulsar.retry_topic, "retry")
    dead_letter_sink = await _publisher(stack, config, config.pulsar.dlq_topic, "dlq")
    replay_sink = await _publisher(stack, config, config.pulsar.topic, "replay")
    await _ensure_dead_letter_subscription(config)
    sources = [
        await stack.enter_async_context(_open_source(config, topic))
        for topic in (config.pulsar.topic, config.pulsar.retry_topic)
    ]
    handler = Handler(
        verdicts=verdicts,
        backends=backends,
        retry_sink=retry_sink,
        dead_letter_sink=dead_letter_sink,
        policy=config.retry,
        max_hold=config.max_hold,
        metrics=metrics,
    )
    settings = PoolSettings(
        max_in_flight=config.max_in_flight,
        retry_max_in_flight=config.retry_max_in_flight,
        drain_timeout=config.drain_timeout,
    )
    pool = DeleterPool(handler, sources, settings=settings, metrics=metrics)
    admin = DeleterAdmin(
        topics=_topics(config),
        stats=PulsarTopicStats(http, config.admin_url),
        pool_status=pool.status,
        open_scan=lambda: _open_scan(config),
        replay_sink=replay_sink,
        scan_max=config.dlq_scan_max,
    )
    return Deleter(pool, admin)


def _topics(config: DeleterConfig) -> Topics:
    return Topics(
        system=config.pulsar.topic,
        retry=config.pulsar.retry_topic,
        dead_letter=config.pulsar.dlq_topic,
        subscription=config.subscription,
        dead_letter_subscription=config.dlq_subscription,
    )


async def _bookkeeper(
    stack: AsyncExitStack, config: DeleterConfig, http: aiohttp.ClientSession
) -> BookKeeperDeleter | None:
    limits = BackendLimits(
        concurrency=config.zookeeper_limits.concurrency,
        per_second=config.zookeeper_limits.per_second,
    )
    if config.bookkeeper_backend == "bookie-http":
        return BookieHttpDeleter(http, base_url=config.bookie_http_url, limits=limits)
    if config.bookkeeper_backend == "none":
        return None
    zk = config.zookeeper
    store = await stack.enter_async_context(
        ZkMetadataStore.connect(
            zk.servers,
            chroot=zk.chroot or None,
            session_timeout=zk.session_timeout.total_seconds(),
            request_timeout=zk.operation_timeout.total_seconds(),
        )
    )
    layout = await watch_ledgers_layout(stack, store, config.ledgers_root)
    deleter = ZooKeeperLedgerDeleter(
        store,
        locations=lambda: layout.current,
        limits=limits,
        batch_max=config.zookeeper_delete_batch,
    )
    stack.push_async_callback(deleter.aclose)  # the last sweep, before the session closes
    return deleter


async def _s3(stack: AsyncExitStack, config: DeleterConfig) -> OffloadDeleter | None:
    if not config.s3.allowed_buckets:
        return None  # no bucket may be touched: offload PDLIs dead-letter with that reason
    limits = BackendLimits(
        concurrency=config.s3_limits.concurrency, per_second=config.s3_limits.per_second
    )
    return await stack.enter_async_context(
        open_s3_deleter(config.s3, limits=limits, batch_max=config.s3_batch_keys)
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
        subscription=config.subscription,
        receiver_queue_size=config.receiver_queue_size,
        negative_ack_delay=config.release_delay,
        dead_letter_topic=config.pulsar.dlq_topic,
        max_redeliveries=config.max_redeliveries,
        dead_letter_subscription=config.dlq_subscription,
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
