"""The extract's reads for a shared BookKeeper, against the real ZooKeeper, without Spark:
the namespace policies walk, and what an unreadable store becomes (a failed manifest row,
never "no rows")."""

from __future__ import annotations

import json

from devstack.zookeeper import ZooKeeperServer
from services.core.shared_clusters import ZOOKEEPER, SharedCluster, StoreUrl
from services.metadata import ZkMetadataStore
from services.scan.extract.namespaces import read_namespaces
from services.scan.extract.tasks import Out, ReadLimits
from services.scan.extract.units import NAMESPACES, ExtractSettings, Unit, plan_units, run_unit

POLICIES = json.dumps({"replication_clusters": ["west", "east"], "deleted": False}).encode()
LOCAL = json.dumps({"replication_clusters": ["west"]}).encode()
TENANT = json.dumps({"adminRoles": [], "allowedClusters": ["west"]}).encode()


async def test_policies_walk_follows_pulsar_layout(zk: ZooKeeperServer) -> None:
    """`TenantResources.getListOfNamespacesAsync`: a tenant's child with children is a V1
    cluster directory whose children are namespaces; one without children is a V2
    namespace when it holds `Policies` (an empty one is a V1 directory left by a deleted
    namespace). Policies that are not JSON are a row with `decode_error`."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await store.create("/admin/policies/t", TENANT, make_parents=True)
        await store.create("/admin/policies/t/ns", POLICIES)
        await store.create("/admin/policies/t/c1", b"")
        await store.create("/admin/policies/t/c1/old", LOCAL)
        await store.create("/admin/policies/t/left", b"")
        await store.create("/admin/policies/u", TENANT)
        await store.create("/admin/policies/u/bad", b"{not json")
        out: Out = []
        await read_namespaces(store, out, ReadLimits(4))
    rows = sorted((row["namespace"], row["replication_clusters"]) for _, row in out)
    assert rows == [("t/c1/old", ["west"]), ("t/ns", ["east", "west"]), ("u/bad", None)]
    errors = {row["namespace"]: row["decode_error"] for _, row in out}
    assert "not JSON" in str(errors["u/bad"])
    assert {table for table, _ in out} == {"namespaces"}


async def test_unreadable_stores_are_failed_rows(zk: ZooKeeperServer) -> None:
    """A declared cluster whose store does not answer: its listings are `failed` manifest
    rows; a configuration store that does not answer: the namespaces task is `failed`."""
    dead = "127.0.0.1:1"  # nothing listens on port 1
    settings = ExtractSettings(
        zookeeper=zk.address,
        cluster="west",
        zk_timeout_s=1.0,
        shared_clusters=(SharedCluster("east", StoreUrl(ZOOKEEPER, dead, "/b")),),
        configuration_store=StoreUrl(ZOOKEEPER, dead, ""),
    )
    units, rows, _ = await plan_units(settings)
    listed = {row["task_id"]: row["status"] for row in rows}
    assert listed["list:managed_ledgers@east"] == "failed"
    assert listed["list:schemas@east"] == "failed"
    assert listed["list:managed_ledgers"] == "ok"
    assert Unit(NAMESPACES, "/admin/policies") in units
    out = await run_unit(Unit(NAMESPACES, "/admin/policies"), settings)
    assert [(t, r["kind"], r["status"]) for t, r in out] == [
        ("scan_manifest", "namespaces", "failed")
    ]
