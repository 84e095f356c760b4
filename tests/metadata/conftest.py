"""A `MetadataStore` on the session's real ZooKeeper, with an empty tree for each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore


@pytest.fixture
async def store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=5.0, request_timeout=5.0
    ) as connected:
        yield connected
