"""A cluster whose BookKeeper metadata is in a chroot of its own: Pulsar's metadata under
`/pulsar`, BookKeeper's ledgers root under `/bk`, as an operator who gives BookKeeper its own
chroot has it (broker.conf `metadataStoreUrl=zk:host:2181/pulsar`, bookkeeper.conf
`metadataServiceUri=metadata-store:zk:host:2181/bk`; Pulsar's `PulsarMetadataClientDriver`
puts the ledgers root at `/ledgers` under that chroot).

The simulator writes one tree at ZooKeeper's root; `split_into_chroots` moves it apart, so a
read from the wrong store finds nothing there.
"""

from __future__ import annotations

import contextlib

from services.core.config import MetadataStores, ZooKeeperConfig
from services.core.shared_clusters import ZOOKEEPER, StoreUrl
from services.metadata.errors import NoNode
from services.metadata.store import ANY_VERSION, MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore

PULSAR_CHROOT = "/pulsar"
BOOKKEEPER_CHROOT = "/bk"
LEDGERS = "ledgers"


def split_stores(servers: str) -> MetadataStores:
    """Pulsar's store at `/pulsar`, BookKeeper's at `/bk`, both on `servers`."""
    return MetadataStores(
        StoreUrl(ZOOKEEPER, servers, PULSAR_CHROOT), StoreUrl(ZOOKEEPER, servers, BOOKKEEPER_CHROOT)
    )


def split_zookeeper(servers: str) -> ZooKeeperConfig:
    """The services' store settings for the split cluster (as the two URL settings give)."""
    return ZooKeeperConfig(servers=servers, urls=split_stores(servers))


async def split_into_chroots(servers: str) -> None:
    """Move the tree at ZooKeeper's root apart: `/ledgers` to `/bk/ledgers`, everything else
    (Pulsar's metadata) under `/pulsar`."""
    async with ZkMetadataStore.connect(servers) as store:
        await store.create(PULSAR_CHROOT)
        await store.create(BOOKKEEPER_CHROOT)
        for child in sorted(await store.get_children("/")):
            if child in ("zookeeper", PULSAR_CHROOT[1:], BOOKKEEPER_CHROOT[1:]):
                continue
            home = BOOKKEEPER_CHROOT if child == LEDGERS else PULSAR_CHROOT
            await _move(store, f"/{child}", f"{home}/{child}")


async def _move(store: MetadataStore, source: str, target: str) -> None:
    """Copy `source` and everything below it to `target`, then delete the original."""
    node = await store.get(source)
    await store.create(target, node.data)
    for child in await store.get_children(source):
        await _move(store, f"{source}/{child}", f"{target}/{child}")
    with contextlib.suppress(NoNode):
        await store.delete(source, version=ANY_VERSION)
