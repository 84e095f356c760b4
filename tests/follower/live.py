"""A follower on the real ZooKeeper and the devstack broker, and writes shaped as an
unmodified broker makes them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from devstack.pulsar import PulsarBrokerProcess
from services.core.config import PulsarConfig
from services.core.signing import IntentSigner
from services.marker.follower.follower import Follower, FollowerSettings
from services.marker.follower.metrics import FollowerMetrics
from services.marker.own_writes import OwnWrites
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic import IntentPublisher, ProducerSettings, open_intent_publisher
from tests.helpers import assert_eventually
from tests.marker.live import Received, pulsar_config
from tests.store_kinds import StoreKind

SESSION_TIMEOUT = 2.0


@dataclass
class Running:
    follower: Follower
    metrics: FollowerMetrics
    task: asyncio.Task[None]
    stop: asyncio.Event
    store: MetadataStore
    """The follower's own session."""

    async def ready(self) -> None:
        """Wait until it leads and has read everything it was told about."""

        async def following() -> None:
            assert self.follower.active
            assert self.follower.idle.is_set()

        await assert_eventually(following, timeout=20)

    def kill(self) -> None:
        """Stop it without a last checkpoint or release (as a killed process would)."""
        self.task.cancel()


def _open_store(where: str | StoreKind) -> AbstractAsyncContextManager[MetadataStore]:
    """The follower's session: to the ZooKeeper at `where` (host:port), or to the store of a
    `StoreKind` (either kind), with the short session timeout."""
    timeout = timedelta(seconds=SESSION_TIMEOUT)
    if isinstance(where, StoreKind):
        return where.open(session_timeout=timeout, operation_timeout=timedelta(seconds=2))
    return ZkMetadataStore.connect(where, session_timeout=SESSION_TIMEOUT, request_timeout=2.0)


@asynccontextmanager
async def running_follower(
    zk_address: str | StoreKind,
    broker: PulsarBrokerProcess,
    *,
    marker_id: str = "follower-test",
    checkpoint_interval: timedelta = timedelta(seconds=60),
    signer: IntentSigner | None = None,
    pulsar: PulsarConfig | None = None,
    cluster: str = "test",
    own_writes: OwnWrites | None = None,
) -> AsyncIterator[Running]:
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(_open_store(zk_address))
        publisher = await stack.enter_async_context(
            open_intent_publisher(
                pulsar or pulsar_config(broker), ProducerSettings(producer_name=marker_id)
            )
        )
        metrics = FollowerMetrics()
        follower = Follower(
            store=store,
            publisher=publisher,
            settings=FollowerSettings(
                marker_id=marker_id,
                cluster=cluster,
                delivery_delay=timedelta(0),
                checkpoint_interval=checkpoint_interval,
            ),
            metrics=metrics,
            signer=signer,
            own_writes=own_writes,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(follower.run(stop))
        running = Running(follower, metrics, task, stop, store)
        try:
            yield running
        finally:
            stop.set()
            with suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 15)


@asynccontextmanager
async def follower_indexing(
    store: MetadataStore, publisher: IntentPublisher, metrics: FollowerMetrics, path: str
) -> AsyncIterator[Follower]:
    """An in-process follower (marker `f`, no delivery delay) on `store`, publishing through
    `publisher` (a fake in these tests); yields it once it is active and has read `path`
    into its index, and stops it on exit."""
    follower = Follower(
        store=store,
        publisher=publisher,
        settings=FollowerSettings(marker_id="f", delivery_delay=timedelta(0)),
        metrics=metrics,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(follower.run(stop))
    try:

        async def indexed() -> None:
            assert follower.active
            assert follower.index.get(path) is not None

        await assert_eventually(indexed)
        yield follower
    finally:
        stop.set()
        await task


def intents(received: list[Received]) -> set[tuple[int, int, int, str, int]]:
    """(ledger, tier, component, owner path part, fence token) of each PDLI."""
    return {
        (
            r.pdli.ledger_id,
            r.pdli.ledger_type,
            r.pdli.component,
            r.pdli.cursor_name or r.pdli.schema_id or r.pdli.managed_ledger_name,
            r.pdli.fence_token,
        )
        for r in received
    }


def counter(metric: Any, *labels: str) -> float:
    """A prometheus_client counter's current value (labelled or not)."""
    target = metric.labels(*labels) if labels else metric
    return float(target._value.get())
