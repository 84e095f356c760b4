"""Fixtures of the simulator tests: a metadata store and an object store on the real servers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devstack.s3 import S3Server
from devstack.simulator.s3 import S3ObjectStore, open_object_store
from devstack.simulator.spec import ClusterSpec, OrphanPlan
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore

# Small enough for a fast suite, big enough for every kind of record and orphan.
SMALL = ClusterSpec(
    seed=7,
    tenants=1,
    namespaces_per_tenant=2,
    topics_per_namespace=3,
    partitioned_share=0.4,
    partitions=(2, 2),
    ledgers_per_topic=(2, 4),
    cursors_per_topic=(1, 2),
    new_topic_share=0.15,
    orphans=OrphanPlan.some(),
)


@pytest.fixture
async def store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(zk.address) as connected:
        yield connected


@pytest.fixture
async def objects(s3: S3Server) -> AsyncIterator[S3ObjectStore]:
    async with open_object_store(s3.client_config()) as opened:
        yield opened
