"""The reconciler's pre-flight under ZooKeeper security: it authenticates like the services,
names a refusal with the settings to fix, and refuses SASL before connecting.

Pulsar's znodes are modelled as a secured Pulsar creates them (`ZooDefs.Ids.CREATOR_ALL_ACL`
in BookKeeper's `ZkUtils.getACLs` and Pulsar's `ZKMetadataStore` when authentication is on):
only the brokers' identity may touch them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.zookeeper import ZooKeeperServer
from services.core.zk_security import ZooKeeperSecurity
from services.metadata import ZkMetadataStore
from services.metadata.acl import ALL, AclEntry, digest_id
from services.scan.extract.units import ExtractSettings
from services.scan.preflight.checks import source_problems
from services.scan.preflight.zk import check_metadata

CLUSTER = "local"
PULSAR = ZooKeeperSecurity(digest_user="pulsar", digest_password="p-pass")


@pytest.fixture(scope="module")
def secured_zk() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(super_password="super-secret") as server:
        yield server


async def _creator_only_roots(server: ZooKeeperServer) -> None:
    own = [AclEntry("digest", digest_id("pulsar", "p-pass"), ALL)]
    async with ZkMetadataStore.connect(server.address, security=PULSAR) as broker:
        for path in ("/managed-ledgers", "/ledgers", "/admin", "/admin/clusters"):
            if await broker.exists(path) is None:
                await broker.create(path)
        if await broker.exists(f"/admin/clusters/{CLUSTER}") is None:
            await broker.create(f"/admin/clusters/{CLUSTER}", b"{}")
        for path in ("/managed-ledgers", "/ledgers", "/admin/clusters"):
            acl = await broker.get_acl(path)
            if acl.entries != own:
                await broker.set_acl(path, own, version=acl.version)


async def test_the_brokers_identity_passes_and_no_identity_is_named(
    secured_zk: ZooKeeperServer,
) -> None:
    """With the brokers' digest identity the pre-flight finds nothing; without it, one line
    says ZooKeeper refused access and names the settings."""
    await _creator_only_roots(secured_zk)
    args = (secured_zk.address, None, "/ledgers", CLUSTER)
    assert await check_metadata(*args, security=PULSAR) == []
    [problem] = await check_metadata(*args, security=ZooKeeperSecurity())
    assert "NOAUTH" in problem.what
    assert "TOMBSTONE_ZOOKEEPER_AUTH" in problem.fix


async def test_sasl_is_refused_before_any_connection() -> None:
    """SASL asked for: one problem naming the setting, whatever the address."""
    settings = ExtractSettings(
        zookeeper="127.0.0.1:1", cluster=CLUSTER, zk_security=ZooKeeperSecurity(sasl=True)
    )
    [problem] = await source_problems(settings, [])
    assert problem.what.startswith("TOMBSTONE_ZOOKEEPER_SASL=true")
