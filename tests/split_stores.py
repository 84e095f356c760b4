"""A cluster whose BookKeeper metadata is in a chroot of its own: Pulsar's metadata under
`/pulsar`, BookKeeper's ledgers root under `/bk`, as an operator who gives BookKeeper its own
chroot has it (broker.conf `metadataStoreUrl=zk:host:2181/pulsar`, bookkeeper.conf
`metadataServiceUri=metadata-store:zk:host:2181/bk`; Pulsar's `PulsarMetadataClientDriver`
(`AbstractMetadataDriver.resolveLedgersRootPath`) puts the ledgers root at `/ledgers` under
that chroot). Nothing is at ZooKeeper's root, so a read from the wrong store finds nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from devstack.simulator import ClusterModel, ClusterSpec
from devstack.simulator.s3 import ObjectStore, open_object_stores
from devstack.simulator.writer import write_cluster
from services.core.config import MetadataStores, ZooKeeperConfig
from services.core.shared_clusters import ZOOKEEPER, StoreUrl
from services.metadata.paths import LAYOUT_ZNODE, layout_text
from services.metadata.zookeeper.store import ZkMetadataStore

PULSAR_CHROOT = "/pulsar"
BOOKKEEPER_CHROOT = "/bk"


def split_stores(servers: str) -> MetadataStores:
    """Pulsar's store at `/pulsar`, BookKeeper's at `/bk`, both on `servers`."""
    return MetadataStores(
        StoreUrl(ZOOKEEPER, servers, PULSAR_CHROOT), StoreUrl(ZOOKEEPER, servers, BOOKKEEPER_CHROOT)
    )


def split_zookeeper(servers: str) -> ZooKeeperConfig:
    """The services' store settings for the split cluster (as the two URL settings give)."""
    return ZooKeeperConfig(servers=servers, urls=split_stores(servers))


async def _bookkeeper_root(store: ZkMetadataStore, root: str, spec: ClusterSpec) -> None:
    """The ledgers root as BookKeeper's cluster initialisation leaves it
    (`ZKRegistrationManager.initNewCluster`: the root, `LAYOUT`, `INSTANCEID`, the bookies'
    `available` and `available/readonly`, and `idgen`), before any ledger: the simulator
    writes the ledgers into an existing root of a store of its own."""
    await store.create(root)
    await store.create(f"{root}/{LAYOUT_ZNODE}", layout_text(spec.layout))
    await store.create(f"{root}/INSTANCEID", b"split-stores")
    await store.create(f"{root}/available")
    await store.create(f"{root}/available/readonly")
    await store.create(f"{root}/idgen")


async def write_split_cluster(
    spec: ClusterSpec, servers: str, s3_config: Mapping[str, str] | None
) -> ClusterModel:
    """Write `spec`'s cluster with Pulsar's metadata under `/pulsar` and the ledgers root
    under `/bk` (the simulator's writer takes BookKeeper's store apart)."""
    async with ZkMetadataStore.connect(servers) as root:
        for chroot in (PULSAR_CHROOT, BOOKKEEPER_CHROOT):
            await root.create(chroot)
        await _bookkeeper_root(root, f"{BOOKKEEPER_CHROOT}{spec.ledgers_root}", spec)
    async with contextlib.AsyncExitStack() as stack:
        pulsar = await stack.enter_async_context(
            ZkMetadataStore.connect(servers, chroot=PULSAR_CHROOT)
        )
        bookkeeper = await stack.enter_async_context(
            ZkMetadataStore.connect(servers, chroot=BOOKKEEPER_CHROOT)
        )
        objects: ObjectStore | None = None
        if s3_config is not None:
            objects = await stack.enter_async_context(open_object_stores(s3_config, None))
        return await write_cluster(spec, store=pulsar, s3_client=objects, bookkeeper=bookkeeper)
