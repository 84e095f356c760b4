"""The verifier's reads under an adaptive limit, on the real ZooKeeper: unanswered reads cut
the limit, and an outage (nothing answered for a while) is forgiven when answers return."""

from __future__ import annotations

import contextlib

from devstack.zookeeper import ZooKeeperServer
from services.core.adaptive import AdaptiveLimiter, LimitSettings
from services.core.errors import Unavailable
from services.metadata.errors import zookeeper_signal
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.limited import LimitedZnodeStore
from services.verifier.store_adapter import MetadataZnodeStore
from tests.helpers import assert_eventually


async def test_zookeeper_outage_cuts_the_limit_and_is_forgiven_after(
    zk: ZooKeeperServer, store: ZkMetadataStore
) -> None:
    settings = LimitSettings(min_limit=1, max_limit=64, initial_limit=16, outage_after=1.0)
    limiter = AdaptiveLimiter(settings, classify=zookeeper_signal)
    reads = LimitedZnodeStore(MetadataZnodeStore(store), limiter)
    await store.create("/probe", b"x")
    assert await reads.read("/probe") is not None
    zk.stop()
    try:
        lowest = limiter.limit
        for _ in range(2):
            with contextlib.suppress(Unavailable):
                await reads.read("/probe")
            lowest = min(lowest, limiter.limit)
    finally:
        zk.start()
    assert lowest < 16  # unanswered reads cut it

    async def answers() -> None:
        try:
            assert await reads.read("/probe") is not None
        except Unavailable as exc:
            raise AssertionError("ZooKeeper not back yet") from exc

    await assert_eventually(answers, timeout=30, interval=0.3)
    assert limiter.limit >= 16  # the outage is over: back where it was, not at the floor
