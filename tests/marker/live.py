"""Helpers for tests against the real ZooKeeper and the devstack broker."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import grpc
import pulsar
from grpc import aio

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.core.config import GrpcServerConfig, PulsarConfig
from services.core.grpc_server import ServiceRunner
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker, MarkingSettings
from services.marker.metrics import MarkerMetrics
from services.marker.servicer import SERVICE_NAME, MarkerServicer
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic import ProducerSettings, decode_intent, open_intent_publisher
from services.systopic.setup import SetupPlan, prepare_topics
from tests.store_kinds import StoreKind
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

TOPIC = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 4


@dataclass
class Received:
    pdli: _pd.PendingDeleteLedgerInfo
    properties: dict[str, str]
    partition_key: str
    partition: int
    producer_name: str


def create_system_topic(broker: PulsarBrokerProcess, partitions: int = PARTITIONS) -> None:
    """What `tombstone setup` leaves: the topics, the deleters' subscriptions, retention."""
    prepare_topics(SetupPlan.for_topic(broker.admin_url, TOPIC, partitions))


def pulsar_config(broker: PulsarBrokerProcess, partitions: int = PARTITIONS) -> PulsarConfig:
    return PulsarConfig(service_url=broker.service_url, topic=TOPIC, partitions=partitions)


def _read_all(url: str, expected: int, quiet_ms: int) -> list[Received]:
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(
            TOPIC,
            "test-reader",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        out: list[Received] = []
        while True:
            # Wait long for the expected messages, then briefly for any extra one.
            timeout = 10_000 if len(out) < expected else quiet_ms
            try:
                msg = consumer.receive(timeout_millis=timeout)
            except pulsar.Timeout:
                return out
            consumer.acknowledge(msg)
            out.append(
                Received(
                    decode_intent(msg.data(), msg.properties()),
                    dict(msg.properties()),
                    msg.partition_key(),
                    msg.message_id().partition(),
                    msg.producer_name(),
                )
            )
    finally:
        client.close()


async def read_topic(
    broker: PulsarBrokerProcess, expected: int, *, quiet_ms: int = 300
) -> list[Received]:
    """Every PDLI on the system topic (waits for `expected`, then checks for extras)."""
    return await asyncio.to_thread(_read_all, broker.service_url, expected, quiet_ms)


@asynccontextmanager
async def zk_store(zookeeper: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(
        zookeeper.address, request_timeout=2.0, session_timeout=4.0
    ) as store:
        yield store


def _open_store(where: ZooKeeperServer | StoreKind) -> AbstractAsyncContextManager[MetadataStore]:
    """A session on the test's store: the ZooKeeper server, or either kind of store."""
    if isinstance(where, StoreKind):
        return where.open()
    return zk_store(where)


@asynccontextmanager
async def live_marker(
    zookeeper: ZooKeeperServer | StoreKind,
    broker: PulsarBrokerProcess,
    *,
    producer_name: str = "marker-test",
    pause_after_send: timedelta | None = None,
    send_timeout: timedelta = timedelta(seconds=30),
    max_batch: int = 10_000,
) -> AsyncIterator[tuple[Marker, MetadataStore, _mk_grpc.MarkerStub]]:
    """A Marker on real ZooKeeper (or the store of a `StoreKind`) and the devstack broker,
    served over gRPC on a free port."""
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(_open_store(zookeeper))
        settings = ProducerSettings(producer_name=producer_name, send_timeout=send_timeout)
        publisher = await stack.enter_async_context(
            open_intent_publisher(pulsar_config(broker), settings)
        )
        marker = Marker(
            store=store,
            publisher=publisher,
            journal=ReceiptJournal(retry_window=timedelta(seconds=60)),
            settings=MarkingSettings(
                marker_id=producer_name, cluster="test", pause_after_send=pause_after_send
            ),
            metrics=MarkerMetrics(),
        )
        runner = ServiceRunner(
            name="marker",
            grpc=GrpcServerConfig(port=0),
            method_roles={},
            handle_signals=False,
        )
        runner.add_servicer(
            _mk_grpc.add_MarkerServicer_to_server,
            MarkerServicer(marker, max_batch=max_batch),
            SERVICE_NAME,
        )
        port = await runner.start()
        stack.push_async_callback(runner.shutdown)
        channel = aio.insecure_channel(f"127.0.0.1:{port}")
        stack.push_async_callback(channel.close)
        yield marker, store, _mk_grpc.MarkerStub(channel)


def status_of(error: BaseException) -> grpc.StatusCode:
    assert isinstance(error, aio.AioRpcError)
    return error.code()
