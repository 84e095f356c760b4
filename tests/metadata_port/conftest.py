"""One contract for the `MetadataStore` port, run on every adapter: ZooKeeper (the session's
real server) and Oxia (a devstack server with one shard and with three)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from devstack.zookeeper import ZooKeeperServer
from services.metadata.oxia import OxiaMetadataStore
from services.metadata.store import MetadataStore
from services.metadata.zookeeper import ZkMetadataStore

Opener = Callable[[], AbstractAsyncContextManager[MetadataStore]]

BACKENDS = ["zookeeper", "oxia-1-shard", "oxia-3-shards"]
REQUEST_TIMEOUT = 5.0
SESSION_TIMEOUT = 3.0


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def oxia_server(backend: str) -> Iterator[OxiaServer | None]:
    if not backend.startswith("oxia"):
        yield None
        return
    with running_in_thread(shards=int(backend.split("-")[1])) as server:
        yield server


@pytest.fixture
def zk_server(request: pytest.FixtureRequest, backend: str) -> ZooKeeperServer | None:
    # Only the ZooKeeper runs start (and wipe) the session's ZooKeeper.
    if backend != "zookeeper":
        return None
    server: ZooKeeperServer = request.getfixturevalue("zk")
    return server


@pytest.fixture
def open_store(oxia_server: OxiaServer | None, zk_server: ZooKeeperServer | None) -> Opener:
    """Opens another store (another session) on the same server."""

    def opener() -> AbstractAsyncContextManager[MetadataStore]:
        if oxia_server is not None:
            return OxiaMetadataStore.connect(
                oxia_server.address,
                session_timeout=SESSION_TIMEOUT,
                request_timeout=REQUEST_TIMEOUT,
            )
        assert zk_server is not None
        return ZkMetadataStore.connect(
            zk_server.address, session_timeout=SESSION_TIMEOUT, request_timeout=REQUEST_TIMEOUT
        )

    return opener


@pytest.fixture
async def store(open_store: Opener) -> AsyncIterator[MetadataStore]:
    async with open_store() as opened:
        yield opened


async def eventually(check: Callable[[], Any], what: str, bound: float = 15.0) -> None:
    """Poll `check` (a coroutine function) until it returns true; the bound only stops a
    hung test, it is not a timing claim."""
    deadline = time.monotonic() + bound
    while not await check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.05)
