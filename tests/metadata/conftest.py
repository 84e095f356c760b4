"""A `MetadataStore` on the session's real ZooKeeper, with an empty tree for each test, and a
fault proxy in front of that ZooKeeper."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore


@pytest.fixture
async def store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=5.0, request_timeout=5.0
    ) as connected:
        yield connected


@pytest.fixture
async def proxy(zk: ZooKeeperServer) -> AsyncIterator[ZooKeeperFaultProxy]:
    """A proxy to the session's ZooKeeper whose faults a test injects."""
    async with ZooKeeperFaultProxy(zk.host, zk.port) as running:
        yield running
