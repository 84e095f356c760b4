"""The ZooKeeper fault proxy's `cut`: a cut longer than the session timeout expires the
client's session (the chaos campaign's `zk_expire` relies on it); the client then works on
a new session."""

from __future__ import annotations

import asyncio

from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.helpers import assert_eventually


async def test_a_cut_longer_than_the_session_timeout_expires_the_session(
    zk: ZooKeeperServer,
) -> None:
    async with (
        ZooKeeperFaultProxy(zk.host, zk.port) as proxy,
        ZkMetadataStore.connect(proxy.address, session_timeout=2.0) as store,
    ):
        await store.create("/cut-probe", b"x")
        before = store._session.session_id
        proxy.cut(4.0)
        await asyncio.sleep(4.5)

        async def answered_on_a_new_session() -> None:
            assert await store.exists("/cut-probe") is not None
            assert store._session.session_id not in (before, None)

        await assert_eventually(answered_on_a_new_session, timeout=30)
        assert proxy.cuts == 1
