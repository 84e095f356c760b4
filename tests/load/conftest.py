"""A workload prepared on the real ZooKeeper and S3 (no marker), with its tracker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from grpc import aio

from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import Workload, WorkloadOptions
from devstack.s3 import S3Server
from devstack.simulator.s3 import S3ObjectStore, open_object_store
from devstack.zookeeper import ZooKeeperServer
from services.metadata.zookeeper.store import ZkMetadataStore

BUCKET = "pulsar-offload"


@dataclass
class Prepared:
    workload: Workload
    tracker: Tracker
    store: ZkMetadataStore
    objects: S3ObjectStore


@pytest.fixture
async def prepared(zk: ZooKeeperServer, s3: S3Server) -> AsyncIterator[Prepared]:
    """Two topics written by the workload (one listed ledger each), nothing marked yet."""
    options = WorkloadOptions(brokers=1, topics=2, rate=1.0, duration=0.0)
    async with (
        ZkMetadataStore.connect(zk.address) as store,
        open_object_store(s3.client_config()) as objects,
    ):
        # The checks never call the marker: a channel to nowhere stands in.
        channel = aio.insecure_channel("127.0.0.1:9")
        tracker = Tracker(store, objects, BUCKET, min_age=0.0)
        workload = Workload(
            options, store=store, objects=objects, marker=channel,
            bucket=BUCKET, cluster="standalone", on_marked=tracker.add,
        )  # fmt: skip
        await workload.prepare()
        yield Prepared(workload, tracker, store, objects)
        await channel.close()
