"""Where the demo's metadata lives: the devstack ZooKeeper (`make run`), or the devstack Oxia
server with Pulsar's metadata in namespace `broker` and BookKeeper's in `bookkeeper`, as
Pulsar's docs lay an Oxia deployment out (`metadataStoreUrl=oxia://host:6648/broker`,
`bookkeeperMetadataServiceUri=metadata-store:oxia://host:6648/bookkeeper`).

Each kind gives the demo's parts the same three things: a `MetadataStore` holding the whole
cluster (one session on ZooKeeper; a `SplitStore` over both namespaces on Oxia), the
settings that point the services at it, and a store for the neighbour cluster's own
metadata.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from devstack.neighbour import PlantedNeighbour, plant, plant_next_to
from devstack.oxia import OxiaServer
from devstack.reconcile_command import ReconcileTarget
from devstack.s3 import S3Locations
from devstack.simulator.model import ClusterModel
from devstack.simulator.spec import FIRST_LONG_LEDGER_ID, ClusterSpec
from devstack.split_store import SplitStore
from devstack.zookeeper import ZooKeeperServer
from services.metadata import MetadataStore, ZkMetadataStore
from services.metadata.oxia import OxiaMetadataStore

ZOOKEEPER = "zookeeper"
OXIA = "oxia"
KINDS = (ZOOKEEPER, OXIA)
PULSAR_NAMESPACE = "broker"
BOOKKEEPER_NAMESPACE = "bookkeeper"
NEIGHBOUR_NAMESPACE = "neighbour"
OXIA_NAMESPACES = (PULSAR_NAMESPACE, BOOKKEEPER_NAMESPACE, NEIGHBOUR_NAMESPACE)
# Within the range Oxia accepts (2 s to 5 min), as the services' default session timeout is.
_OXIA_SESSION = 30.0
_OXIA_REQUEST = 10.0


class DemoMetadata(Protocol):
    """The demo's metadata store, whatever its kind."""

    @property
    def kind(self) -> str: ...

    def service_env(self) -> dict[str, str]:
        """The settings a service needs to use the store (Pulsar's and BookKeeper's)."""
        ...

    def cluster(self, ledgers_root: str) -> contextlib.AbstractAsyncContextManager[MetadataStore]:
        """A session to the whole cluster: the ledgers root and Pulsar's metadata."""
        ...


@dataclass(frozen=True)
class ZooKeeperMetadata:
    """Everything in one ZooKeeper, under its root."""

    zookeeper: ZooKeeperServer
    kind: str = ZOOKEEPER

    def service_env(self) -> dict[str, str]:
        return self.zookeeper.service_env()

    def cluster(self, ledgers_root: str) -> contextlib.AbstractAsyncContextManager[MetadataStore]:
        del ledgers_root  # on ZooKeeper, one tree holds both kinds of metadata
        return ZkMetadataStore.connect(self.zookeeper.address)


@dataclass(frozen=True)
class OxiaMetadata:
    """Pulsar's metadata and BookKeeper's in two namespaces of one Oxia server (a third,
    `neighbour`, holds the neighbour cluster's metadata)."""

    server: OxiaServer
    kind: str = OXIA

    def url(self, namespace: str) -> str:
        """The store as Pulsar's `oxia://` URLs (and Tombstone's settings) name it."""
        return f"oxia://{self.server.address}/{namespace}"

    def service_env(self) -> dict[str, str]:
        return {
            "TOMBSTONE_METADATA_STORE_URL": self.url(PULSAR_NAMESPACE),
            "TOMBSTONE_BOOKKEEPER_METADATA_URL": self.url(BOOKKEEPER_NAMESPACE),
        }

    def namespace(self, namespace: str) -> contextlib.AbstractAsyncContextManager[MetadataStore]:
        return OxiaMetadataStore.connect(
            self.server.address,
            namespace=namespace,
            session_timeout=_OXIA_SESSION,
            request_timeout=_OXIA_REQUEST,
        )

    @contextlib.asynccontextmanager
    async def cluster(self, ledgers_root: str) -> AsyncIterator[MetadataStore]:
        async with (
            self.namespace(PULSAR_NAMESPACE) as pulsar,
            self.namespace(BOOKKEEPER_NAMESPACE) as bookkeeper,
        ):
            yield SplitStore(pulsar, bookkeeper, ledgers_root)


def cluster_store(
    where: str | DemoMetadata, ledgers_root: str
) -> contextlib.AbstractAsyncContextManager[MetadataStore]:
    """A session to the whole cluster in `where`: a ZooKeeper's `host:port`, or a demo store."""
    if isinstance(where, str):
        return ZkMetadataStore.connect(where)
    return where.cluster(ledgers_root)


async def plant_neighbour(model: ClusterModel, metadata: DemoMetadata) -> PlantedNeighbour:
    """The neighbour cluster (`devstack.neighbour`) next to `model`'s: its metadata in a
    chroot of the ZooKeeper, or in the Oxia namespace `neighbour`; its ledgers in the shared
    ledgers root either way."""
    if isinstance(metadata, ZooKeeperMetadata):
        return await plant_next_to(model, metadata.zookeeper.address)
    assert isinstance(metadata, OxiaMetadata), metadata
    async with (
        metadata.cluster(model.spec.ledgers_root) as shared,
        metadata.namespace(NEIGHBOUR_NAMESPACE) as theirs,
    ):
        return await plant(
            shared,
            theirs,
            ledgers_root=model.spec.ledgers_root,
            bookies=model.bookies,
            ensemble_size=model.spec.ensemble_size,
            long_ids=any(i >= FIRST_LONG_LEDGER_ID for i in model.ledgers),
            servers=metadata.server.address,
            chroot="",
            oxia_namespace=NEIGHBOUR_NAMESPACE,
        )


def reconcile_target(
    metadata: DemoMetadata, spec: ClusterSpec, s3: S3Locations, min_age: timedelta
) -> ReconcileTarget:
    """What `tombstone reconcile run` reads: the ZooKeeper, or Oxia's two namespaces by URL;
    `min_age`: its runs' --min-age."""
    if isinstance(metadata, ZooKeeperMetadata):
        return ReconcileTarget.of(spec, metadata.zookeeper.address, s3, min_age)
    assert isinstance(metadata, OxiaMetadata), metadata
    return dataclasses.replace(
        ReconcileTarget.of(spec, "", s3, min_age),
        metadata_store=metadata.url(PULSAR_NAMESPACE),
        bookkeeper_metadata=metadata.url(BOOKKEEPER_NAMESPACE),
    )
