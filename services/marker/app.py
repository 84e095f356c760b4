"""The marker's lifecycle: open ZooKeeper, the system-topic producer and the verifier channel
on the runner's exit stack, serve `Marker`, and close everything in reverse on stop."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AsyncExitStack

import aiohttp
import structlog

from services.core.client import open_channel
from services.core.config import SHARED_CLUSTERS
from services.core.grpc_server import ServiceRunner, follow_session
from services.core.service_main import check_reachable
from services.core.shared_clusters import SharedCluster
from services.marker._collector import settle_heap
from services.marker._verifier import GrpcBelieveClient
from services.marker.believe import BackgroundBeliever
from services.marker.config import MarkerConfig
from services.marker.follower.follower import Follower, FollowerSettings
from services.marker.follower.metrics import FollowerMetrics
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker, MarkingSettings
from services.marker.metrics import MarkerMetrics
from services.marker.neighbours import Neighbours
from services.marker.ports import OwnerStore
from services.marker.servicer import MARK_METHOD, SERVICE_NAME, MarkerServicer
from services.metadata.connect import connect_pulsar_store, connect_store
from services.metadata.peer_settings import PeerSettings, Published
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.secure import refuse_unsecured_if_zookeeper
from services.systopic import IntentPublisher, ProducerSettings, open_intent_publisher
from services.systopic.admin_auth import confirm_credentials, secured_admin
from services.systopic.subscription_watch import GatedPublisher, SubscriptionWatch, WatchSettings
from tombstone.v1 import marker_pb2_grpc as _mk_grpc

_log = structlog.get_logger(__name__)

METHOD_ROLES = {MARK_METHOD: ("broker", "reconciler", "admin")}


def producer_settings(config: MarkerConfig) -> ProducerSettings:
    return ProducerSettings(
        producer_name=config.marker_id,
        max_in_flight=config.max_in_flight,
        max_round=config.max_round,
        send_timeout=config.send_timeout,
    )


def marking_settings(config: MarkerConfig) -> MarkingSettings:
    return MarkingSettings(
        marker_id=config.marker_id,
        cluster=config.cluster,
        delivery_delay=config.delivery_delay,
        retry_window=config.retry_window,
        encoding=config.encoding,
        pause_after_send=config.pause_after_send,
        offload_defaults=config.offload_defaults,
        offload_tier=config.offload_tier,
    )


def published_settings(config: MarkerConfig) -> Published:
    """What the verifier and the deleter must agree with (`services.metadata.peer_settings`)."""
    return Published(
        service="marker",
        instance=config.marker_id,
        offload_tier=config.offload_tier,
        default_bucket=config.offload_defaults.bucket,
        retry_window_s=config.retry_window.total_seconds(),
        cluster=config.cluster,
    )


async def open_journal(stack: AsyncExitStack, config: MarkerConfig) -> ReceiptJournal:
    file = None
    if config.journal_dir is not None:
        file = config.journal_dir / f"receipts-{config.marker_id}.log"
    journal = ReceiptJournal(retry_window=config.retry_window, file=file)
    journal.open()
    stack.callback(journal.close)
    return journal


async def build_marker(
    stack: AsyncExitStack,
    config: MarkerConfig,
    metrics: MarkerMetrics,
    *,
    store: OwnerStore,
    publisher: IntentPublisher,
    neighbours: Neighbours | None = None,
) -> Marker:
    """The domain object with its journal and (optional) verifier reports on `stack`."""
    believer = None
    if config.verifier is not None:
        channel = open_channel(config.verifier)
        stack.push_async_callback(channel.close)
        believer = BackgroundBeliever(GrpcBelieveClient(channel), metrics)
        stack.push_async_callback(believer.aclose)
    return Marker(
        store=store,
        publisher=publisher,
        journal=await open_journal(stack, config),
        settings=marking_settings(config),
        believer=believer,
        metrics=metrics,
        signer=config.signer,
        neighbours=neighbours,
    )


def watch_settings(config: MarkerConfig) -> WatchSettings:
    return WatchSettings(
        topic=config.pulsar.topic,
        subscription=config.deleter_subscription,
        partitions=config.pulsar.partitions,
        interval=config.subscription_check_interval,
        unknown_grace=config.subscription_unknown_grace,
    )


async def open_watch(
    stack: AsyncExitStack, config: MarkerConfig, metrics: MarkerMetrics
) -> SubscriptionWatch:
    """The deleters' subscription watch, checked once before anything can publish."""
    http = await stack.enter_async_context(aiohttp.ClientSession())
    admin = secured_admin(
        http, config.admin_url, config.pulsar.security, failures=metrics.admin_failures
    )
    watch = SubscriptionWatch(admin, watch_settings(config), gauge=metrics.subscription_missing)
    await watch.check()
    return watch


async def follow_watch(watch: SubscriptionWatch, runner: ServiceRunner) -> None:
    """Health NOT_SERVING while nothing may be published, SERVING again once it may."""
    seen = watch.version
    while True:
        await runner.set_serving(watch.ready)
        seen = await watch.wait_change(seen)


async def start_follower(
    runner: ServiceRunner,
    config: MarkerConfig,
    publisher: IntentPublisher,
    marker: Marker,
    watch: SubscriptionWatch | None = None,
) -> Follower:
    """The follower on its own ZooKeeper session (its watch, leader znode and checkpoint live
    and die with it), publishing through the marker's publisher, signed by its signer; while
    `watch` says the deleters' subscription is missing it holds its changes unpublished."""
    store = await runner.resources.enter_async_context(connect_pulsar_store(config.zookeeper))
    follower = Follower(
        store=store,
        publisher=publisher,
        settings=follower_settings(config),
        metrics=FollowerMetrics(runner.metrics),
        signer=config.signer,
        own_writes=marker.own_writes,
        gate=watch,
    )
    runner.add_background("follower", lambda: follower.run(runner.stopping))
    return follower


def follower_settings(config: MarkerConfig) -> FollowerSettings:
    return FollowerSettings(
        marker_id=config.marker_id,
        cluster=config.cluster,
        delivery_delay=config.delivery_delay,
        offload_defaults=config.offload_defaults,
        offload_tier=config.offload_tier,
        checkpoint_interval=config.follow_checkpoint_interval,
    )


def _connect_neighbour(
    config: MarkerConfig, cluster: SharedCluster
) -> AbstractAsyncContextManager[MetadataStore]:
    return connect_store(
        config.zookeeper, cluster.store, setting=SHARED_CLUSTERS.name, read_only=True
    )


async def serve(config: MarkerConfig, *, handle_signals: bool = True) -> None:
    """Run the marker until SIGTERM/SIGINT."""
    async with ServiceRunner(
        name="marker",
        grpc=config.grpc,
        metrics=config.metrics,
        method_roles=METHOD_ROLES,
        handle_signals=handle_signals,
    ) as runner:
        stack = runner.resources
        zk = config.zookeeper
        # The marker reads only Pulsar's metadata (owners), never BookKeeper's.
        store = await stack.enter_async_context(connect_pulsar_store(zk))
        await refuse_unsecured_if_zookeeper(store, zk.security)  # before anything is written
        board = PeerSettings(store, published_settings(config), metrics=runner.metrics)
        await board.join()  # refuses to start beside a peer whose settings would leak
        stack.push_async_callback(board.leave)
        runner.add_background("peer_settings", lambda: board.watch(runner.stopping))
        # Without its ZooKeeper session the marker can mark nothing: not ready meanwhile.
        runner.add_background("readiness", lambda: follow_session(runner, "zookeeper", store))
        # A broker that refuses connections ends the start now, not after the client's timeout.
        await check_reachable(pulsar=config.pulsar)
        metrics = MarkerMetrics(runner.metrics)
        # A refused credential ends the start now, with its reason, not as a client timeout.
        await confirm_credentials(
            config.admin_url,
            config.pulsar.security,
            config.pulsar.topic,
            failures=metrics.admin_failures,
        )
        producer = await stack.enter_async_context(
            open_intent_publisher(config.pulsar, producer_settings(config))
        )
        watch = await open_watch(stack, config, metrics)
        runner.add_background("subscription_watch", lambda: watch.run(runner.stopping))
        publisher = GatedPublisher(producer, watch)
        neighbours = Neighbours(
            {
                cluster.name: await stack.enter_async_context(_connect_neighbour(config, cluster))
                for cluster in config.shared_clusters
            },
            config.encoding,
        )
        marker = await build_marker(
            stack, config, metrics, store=store, publisher=publisher, neighbours=neighbours
        )
        servicer = MarkerServicer(
            marker, max_batch=config.max_batch, metrics=metrics, unready=watch.unready_reason
        )
        runner.add_servicer(_mk_grpc.add_MarkerServicer_to_server, servicer, SERVICE_NAME)
        if config.follow:
            await start_follower(runner, config, publisher, marker, watch)
        signer = config.signer
        if signer is None:
            _log.warning("pdlis_unsigned", hint="set TOMBSTONE_MARKER_SIGNING_KEYS")
        _log.info(
            "marker_starting",
            marker_id=config.marker_id,
            topic=config.pulsar.topic,
            signing_key_id=signer.key_id if signer is not None else None,
            follow=config.follow,
        )
        # Recorded before the start, so that a held marker never answers SERVING, not even
        # for the moment between binding and its first health update.
        await runner.set_serving(watch.ready)
        await runner.start()
        settle_heap()  # everything kept for the process's life exists now
        runner.add_background("health", lambda: follow_watch(watch, runner))
        await runner.run()
