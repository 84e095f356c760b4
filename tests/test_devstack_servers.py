"""The launchers start real servers that clients can use, and survive stop/start cycles."""

from __future__ import annotations

import aiozk
from aiobotocore.session import get_session

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer


async def test_zookeeper_keeps_data_across_restart(zk: ZooKeeperServer) -> None:
    """A znode written before a restart is there after it (same port, same data dir)."""
    client = aiozk.ZKClient(zk.address)
    await client.start()
    await client.create("/kept", data=b"v1")
    await client.close()

    zk.restart()

    client = aiozk.ZKClient(zk.address)
    await client.start()
    try:
        assert await client.get_data("/kept") == b"v1"
    finally:
        await client.close()


async def test_s3_server_speaks_s3(s3: S3Server) -> None:
    """Objects and their user metadata round-trip through the HTTP endpoint."""
    async with get_session().create_client("s3", **s3.client_config()) as client:
        await client.create_bucket(Bucket="offload")
        await client.put_object(
            Bucket="offload", Key="k", Body=b"x", Metadata={"ManagedLedgerName": "t/n/persistent/a"}
        )
        head = await client.head_object(Bucket="offload", Key="k")
    assert head["Metadata"] == {"managedledgername": "t/n/persistent/a"}
