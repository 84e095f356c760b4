"""A service asked for ZooKeeper security it cannot have refuses to start: exit 2 and one
line naming the setting or the command that fixes it."""

from __future__ import annotations

import asyncio

from devstack.zookeeper import ZooKeeperServer
from services.core.service_main import EXIT_REFUSED
from services.metadata import ZkMetadataStore
from tests.core.test_service_cli import _one_line, _serve

DIGEST = {
    "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER": "tombstone",
    "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD": "t-pass",
}


async def test_world_writable_tombstone_znodes_refuse_the_start(zk: ZooKeeperServer) -> None:
    """Znodes left open by a deployment without authentication: the deleter names the
    first one and `tombstone zookeeper secure`."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await store.create("/tombstone/settings", b"", make_parents=True)
    done = await asyncio.to_thread(
        _serve, "deleter", TOMBSTONE_ZOOKEEPER_SERVERS=zk.address, **DIGEST
    )
    [line] = _one_line(done.stderr)[-1:]
    assert done.returncode == EXIT_REFUSED
    assert line.startswith("deleter: refusing to start: /tombstone (and 1 more) may be changed")
    assert line.endswith("run `tombstone zookeeper secure` with the same settings")


async def test_sasl_refuses_the_start_naming_the_setting(zk: ZooKeeperServer) -> None:
    """SASL cannot be carried: refused before any session, naming the setting."""
    done = await asyncio.to_thread(
        _serve, "deleter", TOMBSTONE_ZOOKEEPER_SERVERS=zk.address, TOMBSTONE_ZOOKEEPER_SASL="true"
    )
    assert (done.returncode, _one_line(done.stderr)[-1].split(": SASL")[0]) == (
        EXIT_REFUSED,
        "deleter: refusing to start: TOMBSTONE_ZOOKEEPER_SASL=true",
    )
