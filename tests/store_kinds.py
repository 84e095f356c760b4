"""The metadata store under a service test, as a parameter: the session's ZooKeeper, or a
devstack Oxia server started for the test (one namespace, `default`, holding both Pulsar's
and BookKeeper's metadata, as `metadataStoreUrl=oxia://host:port/default` with bookkeeper.conf's
`metadataServiceUri=metadata-store:oxia://host:port/default` has it).

A test asks for `store_kind` and gets the services' settings (`StoreKind.zookeeper`, the
`ZooKeeperConfig` the two URL settings give) and a way to open a writer session on the same
store (to write what Pulsar writes, and to check what the services left). Only the tests
chosen to run on both stores take it (docs/testing.md, "Tests on both metadata stores").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import timedelta

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from devstack.zookeeper import ZooKeeperServer
from services.core.config import MetadataStores, ZooKeeperConfig
from services.core.shared_clusters import OXIA, StoreUrl
from services.metadata.connect import connect_pulsar_store
from services.metadata.store import MetadataStore

STORE_KINDS = ["zookeeper", "oxia"]
#: Short enough that a lost session is noticed within seconds; Oxia's minimum is 2 s.
SESSION_TIMEOUT = timedelta(seconds=2)
REQUEST_TIMEOUT = timedelta(seconds=2)


@dataclass(frozen=True)
class StoreKind:
    """One metadata store for a test's services and its writer."""

    name: str
    zookeeper: ZooKeeperConfig
    """The services' metadata-store settings (the URL settings, and the timeouts)."""
    oxia: OxiaServer | None
    """The devstack Oxia server, for its fault hooks; None on ZooKeeper."""
    zk: ZooKeeperServer | None
    """The session's ZooKeeper, for its fault hooks; None on Oxia."""

    @property
    def address(self) -> str:
        """host:port of the store's server."""
        return self.zookeeper.servers if self.oxia is None else self.oxia.address

    def open(
        self,
        *,
        session_timeout: timedelta = SESSION_TIMEOUT,
        operation_timeout: timedelta = REQUEST_TIMEOUT,
    ) -> AbstractAsyncContextManager[MetadataStore]:
        """Another session on the store, opened as the services open theirs (on ZooKeeper,
        under PIP-454's migration guard)."""
        config = dataclasses.replace(
            self.zookeeper, session_timeout=session_timeout, operation_timeout=operation_timeout
        )
        return connect_pulsar_store(config)

    def at(self, address: str) -> StoreKind:
        """The same store reached at another address (a fault proxy's)."""
        if self.oxia is None:
            return dataclasses.replace(
                self, zookeeper=dataclasses.replace(self.zookeeper, servers=address)
            )
        return dataclasses.replace(self, zookeeper=_oxia_config(address))


def _oxia_config(address: str) -> ZooKeeperConfig:
    # The ZooKeeper servers setting keeps its default: two settings must not name the store.
    store = StoreUrl(OXIA, address, "default")
    return ZooKeeperConfig(urls=MetadataStores(store, store))


def store_config(where: ZooKeeperServer | StoreKind) -> ZooKeeperConfig:
    """The services' store settings for a test's store: the session's ZooKeeper server (the
    tests that run on it alone), or either kind."""
    if isinstance(where, StoreKind):
        return where.zookeeper
    return ZooKeeperConfig(servers=where.address)


def open_store(where: ZooKeeperServer | StoreKind) -> AbstractAsyncContextManager[MetadataStore]:
    """A writer's or checker's session on a test's store (as `store_config`)."""
    if isinstance(where, StoreKind):
        return where.open()
    return connect_pulsar_store(store_config(where))


@pytest.fixture
def oxia_store_kind() -> Iterator[StoreKind]:
    """A fresh devstack Oxia server (one shard) for one test."""
    with running_in_thread(shards=1) as server:
        yield StoreKind("oxia", _oxia_config(server.address), server, None)


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> StoreKind:
    """The store under test: the session's ZooKeeper (wiped) or a fresh Oxia server."""
    if request.param == "oxia":
        oxia: StoreKind = request.getfixturevalue("oxia_store_kind")
        return oxia
    zk: ZooKeeperServer = request.getfixturevalue("zk")
    return StoreKind("zookeeper", ZooKeeperConfig(servers=zk.address), None, zk)
