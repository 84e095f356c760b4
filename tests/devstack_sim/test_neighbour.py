"""The demo's neighbour cluster on the real ZooKeeper: its metadata in its own chroot, its
ledgers in our ledgers root, its ids from our BookKeeper's generator."""

from __future__ import annotations

import json

from devstack.neighbour import CHROOT, CLUSTER, NAMESPACE, SUBSCRIPTION, Role, plant_next_to
from devstack.simulator.readback import read_cluster
from devstack.simulator.s3 import S3ObjectStore
from devstack.simulator.writer import write_cluster
from devstack.zookeeper import ZooKeeperServer
from services.metadata import (
    BookKeeperLedgers,
    LedgerLayout,
    LedgerPaths,
    LedgerState,
    ManagedLedgers,
    Schemas,
    ZkMetadataStore,
)
from services.metadata.namespaces import decode_policies, policies_path
from tests.devstack_sim.conftest import SMALL


async def test_neighbour_layout(
    zk: ZooKeeperServer, store: ZkMetadataStore, objects: S3ObjectStore
) -> None:
    """After our cluster is seeded: the neighbour's registration, tenant, namespace and owners
    sit under its chroot and nowhere in ours; its five ledgers sit in our root at hybrid
    paths with Pulsar's custom metadata, their ids the generator's next ones, and the
    generator has moved past them; our cluster's ledgers are untouched."""
    model = await write_cluster(SMALL, store=store, s3_client=objects, concurrency=32)
    before = await read_cluster(store)
    planted = await plant_next_to(model, zk.address)
    root = model.spec.ledgers_root

    # Ids: the generator's next ones after ours, in creation order; the generator moved on.
    ids = [led.ledger_id for led in planted.ledgers]
    assert ids == list(range(max(model.ledgers) + 1, max(model.ledgers) + 6))
    assert [led.role for led in planted.ledgers] == [
        Role.ORPHAN,
        Role.SCHEMA,
        Role.CLOSED,
        Role.CURSOR,
        Role.CURRENT,
    ]
    path, _ = await store.create_sequential(f"{root}/idgen/ID-")
    assert int(path.rsplit("ID-", 1)[1]) == ids[-1] + 1

    # Ledgers: in the shared root at the hybrid path, with the custom metadata Pulsar writes.
    bk = BookKeeperLedgers(store, paths=LedgerPaths(root=root, layout=LedgerLayout.HIERARCHICAL))
    meta = {led.role: (await bk.read(led.ledger_id)).metadata for led in planted.ledgers}
    assert all(led.path.startswith(f"{root}/") for led in planted.ledgers)
    for role in (Role.ORPHAN, Role.CLOSED, Role.CURRENT):
        assert meta[role].managed_ledger_name == planted.ml_name
        assert meta[role].cursor_name is None
    assert meta[Role.CURSOR].cursor_name == SUBSCRIPTION
    assert meta[Role.SCHEMA].component == "schema"
    assert meta[Role.SCHEMA].schema_id == planted.schema_id
    assert {r for r, m in meta.items() if m.state is LedgerState.OPEN} == {
        Role.CURRENT,
        Role.CURSOR,
    }
    assert all(m.application == "pulsar" for m in meta.values())

    # Our cluster: every ledger as it was, nothing of the neighbour's metadata.
    after = await read_cluster(store)
    assert {i: after.ledgers[i] for i in before.ledgers} == before.ledgers
    assert set(after.ledgers) - set(before.ledgers) == planted.ledger_ids
    assert after.managed_ledgers == before.managed_ledgers
    assert after.schemas == before.schemas
    assert await store.exists(policies_path(NAMESPACE)) is None
    assert await store.exists(f"/admin/clusters/{CLUSTER}") is None

    # The neighbour's own store: registration, policies, owners; no ledgers root of its own.
    async with ZkMetadataStore.connect(zk.address, chroot=CHROOT) as theirs:
        cluster = json.loads((await theirs.get(f"/admin/clusters/{CLUSTER}")).data)
        assert cluster["brokerServiceUrl"].startswith("pulsar://")
        policies = await theirs.get(policies_path(NAMESPACE))
        assert decode_policies(policies.data, path="").replication_clusters == (CLUSTER,)
        assert await theirs.exists(policies_path("public/default")) is not None
        assert await theirs.exists(root) is None
        mls = ManagedLedgers(theirs)
        listed = [i.ledgerId for i in (await mls.read(planted.ml_name)).value.ledgerInfo]
        assert listed == planted.ids(Role.CLOSED, Role.CURRENT)
        cursor = (await mls.read_cursor(planted.ml_name, SUBSCRIPTION)).value
        assert [cursor.cursorsLedgerId] == planted.ids(Role.CURSOR)
        locator = (await Schemas(theirs).read(planted.schema_id)).value
        assert [e.position.ledgerId for e in locator.index] == planted.ids(Role.SCHEMA)
    assert planted.store_url == f"zk:{zk.address}{CHROOT}"
