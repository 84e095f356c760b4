"""Open the stores named by addresses and write a simulated cluster into them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager

from devstack.simulator.broker import DeleteFaults
from devstack.simulator.broker_run import BrokerStyleResult, choose, unlink_like_brokers
from devstack.simulator.model import ClusterModel
from devstack.simulator.s3 import ObjectStore, open_object_store, open_object_stores
from devstack.simulator.spec import ClusterSpec
from devstack.simulator.writer import DEFAULT_CONCURRENCY, Progress, write_cluster
from services.metadata import MetadataStore, ZkMetadataStore


async def simulate_into(
    spec: ClusterSpec,
    *,
    zookeeper: str = "",
    s3_config: Mapping[str, str] | None,
    s3_routes: Mapping[str, Mapping[str, str]] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Progress | None = None,
    metadata: AbstractAsyncContextManager[MetadataStore] | None = None,
) -> ClusterModel:
    """Write `spec`'s cluster into the ZooKeeper at `zookeeper` (host:port), or into the
    store `metadata` opens (`devstack.demo_stores`: ZooKeeper, or Oxia's two namespaces as
    one tree), and S3.

    `s3_config` holds aiobotocore client settings (`S3Server.client_config()`); None when
    nothing is offloaded to S3. `s3_routes`: the settings of buckets held at another S3
    location (the spec's second location).
    """
    async with contextlib.AsyncExitStack() as stack:
        opened = ZkMetadataStore.connect(zookeeper) if metadata is None else metadata
        store = await stack.enter_async_context(opened)
        objects: ObjectStore | None = None
        if s3_config is not None:
            objects = await stack.enter_async_context(open_object_stores(s3_config, s3_routes))
        return await write_cluster(
            spec, store=store, s3_client=objects, concurrency=concurrency, progress=progress
        )


async def unlink_into(
    model: ClusterModel,
    *,
    zookeeper: str,
    s3_config: Mapping[str, str] | None,
    faults: DeleteFaults,
) -> BrokerStyleResult:
    """Unlink part of the cluster `model` was written into the way brokers do
    (`broker_run.choose`), with `faults` injected into their deletes."""
    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(ZkMetadataStore.connect(zookeeper))
        objects: ObjectStore | None = None
        if s3_config is not None:
            objects = await stack.enter_async_context(open_object_store(s3_config))
        return await unlink_like_brokers(
            model, choose(model), store=store, objects=objects, faults=faults
        )


def echo_progress(echo: Callable[[str], None]) -> Progress:
    """A progress callback printing each phase when it starts and ends."""

    def report(phase: str, done: int, total: int) -> None:
        if total and done in (0, total):
            echo(f"  {phase}: {done}/{total}")

    return report
