"""Two Pulsar clusters on one BookKeeper, written by the cluster simulator into the real
ZooKeeper: ours (`west`, chroot /a: /a/ledgers, /a/managed-ledgers, /a/schemas,
/a/admin/policies) and a neighbour (`east`, chroot /b: its own /b/managed-ledgers,
/b/schemas, /b/admin/policies, its ledgers in /a/ledgers with the next ids of the shared
generator), as `pulsar initialize-cluster-metadata --existing-bk-metadata-service-uri`
leaves them. Both have `public/default`, geo-replicated between them (`Policies.
replication_clusters` = [east, west]); each has a tenant of its own (`tenant-1`,
`east-1`). Every topic's current ledger and every cursor ledger is OPEN; the neighbour has a
schema per topic and orphans of its own (a trimmed ledger, a stale cursor ledger).

On Oxia (`write_oxia_world`) the same two clusters are two namespaces of one server, `west`
and `east`, as Pulsar's `metadataStoreUrl=oxia://host:port/<namespace>` gives each cluster
its own; BookKeeper's metadata is in ours (`metadataServiceUri=metadata-store:oxia://
host:port/west` in both clusters' bookkeeper settings)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from devstack.simulator import ClusterModel, ClusterSpec, OrphanPlan
from devstack.simulator.writer import write_cluster
from devstack.zookeeper import ZooKeeperServer
from services.core.shared_clusters import OXIA, ZOOKEEPER, SharedCluster, StoreUrl
from services.metadata import ZkMetadataStore
from services.metadata.oxia import OxiaMetadataStore

OURS, THEIRS = "west", "east"
OUR_CHROOT, THEIR_CHROOT = "/a", "/b"
REPLICATED = "public/default"
OUR_OWN = "tenant-1/default"
THEIR_OWN = "east-1/default"


def our_spec() -> ClusterSpec:
    return ClusterSpec(
        seed=11,
        cluster_name=OURS,
        tenants=2,
        namespaces_per_tenant=1,
        topics_per_namespace=3,
        offloaded_share=0.0,
        replicated_to=(THEIRS,),
        orphans=OrphanPlan(unlisted_data=2, deleted_topic=2, stale_cursor=2, unlisted_schema=2),
    )


def their_spec(first_ledger_id: int) -> ClusterSpec:
    return ClusterSpec(
        seed=12,
        cluster_name=THEIRS,
        tenants=2,
        namespaces_per_tenant=1,
        topics_per_namespace=3,
        offloaded_share=0.0,
        schema_share=1.0,
        cursors_per_topic=(1, 2),
        tenant_prefix="east",
        replicated_to=(OURS,),
        first_ledger_id=first_ledger_id,
        orphans=OrphanPlan(unlisted_data=1, stale_cursor=1),
    )


@dataclass
class World:
    ours: ClusterModel
    theirs: ClusterModel

    @property
    def young_since_ms(self) -> int:
        """The later boundary: everything of both clusters was written before it."""
        assert self.theirs.young_since_ms is not None
        return self.theirs.young_since_ms

    def their_ledgers(self) -> dict[int, str]:
        """Their ledgers in BookKeeper → the owner's namespace."""
        ledgers = self.theirs.ledgers.items()
        return {i: namespace(led.owner) for i, led in ledgers if led.in_bookkeeper}

    def our_deletable(self) -> dict[int, str]:
        """Our planted deletable orphans → their namespace."""
        return {
            p.ledger_id: namespace(self.ours.ledgers[p.ledger_id].owner)
            for p in self.ours.planted
            if p.deletable and p.ledger_id is not None
        }


def namespace(owner: str) -> str:
    """`tenant/ns` of a V2 ML name or schema id (the simulator writes V2 names here)."""
    return "/".join(owner.split("/")[:2])


def declared(zk: ZooKeeperServer) -> SharedCluster:
    return SharedCluster(THEIRS, StoreUrl(ZOOKEEPER, zk.address, THEIR_CHROOT))


async def write_world(zk: ZooKeeperServer) -> World:
    async with ZkMetadataStore.connect(zk.address) as root:
        for chroot in (OUR_CHROOT, THEIR_CHROOT):
            await root.create(chroot)
    async with (
        ZkMetadataStore.connect(zk.address, chroot=OUR_CHROOT) as a,
        ZkMetadataStore.connect(zk.address, chroot=THEIR_CHROOT) as b,
    ):
        ours = await write_cluster(our_spec(), store=a, s3_client=None)
        theirs = await write_cluster(
            their_spec(max(ours.ledgers) + 1), store=b, s3_client=None, bookkeeper=a
        )
    return World(ours, theirs)


def oxia_store(address: str, cluster: str) -> StoreUrl:
    """The Oxia namespace holding `cluster`'s metadata (named after the cluster)."""
    return StoreUrl(OXIA, address, cluster)


def declared_on_oxia(address: str) -> SharedCluster:
    return SharedCluster(THEIRS, oxia_store(address, THEIRS))


async def write_oxia_world(address: str) -> World:
    """The two clusters in the namespaces `west` and `east` of the Oxia server at `address`
    (it must serve both), the neighbour's ledgers in ours."""

    def connect(namespace: str) -> AbstractAsyncContextManager[OxiaMetadataStore]:
        return OxiaMetadataStore.connect(
            address, namespace=namespace, session_timeout=10.0, request_timeout=10.0
        )

    async with connect(OURS) as a, connect(THEIRS) as b:
        ours = await write_cluster(our_spec(), store=a, s3_client=None)
        theirs = await write_cluster(
            their_spec(max(ours.ledgers) + 1), store=b, s3_client=None, bookkeeper=a
        )
    return World(ours, theirs)
