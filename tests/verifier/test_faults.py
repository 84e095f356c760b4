"""Faults: ZooKeeper or S3 unavailable → RETRY, never DELETE; recovery needs no restart."""

from __future__ import annotations

import asyncio
from typing import Any

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.verifier.model import Decision
from tests.helpers import assert_eventually
from tests.verifier.world import UUID, World, pdli
from tombstone.v1 import pending_delete_pb2 as pb

OFFLOAD: dict[str, Any] = {"tier": pb.OFFLOAD_LEDGER, "uuid": UUID}


async def eventually_delete(parts: Any, request: pb.PendingDeleteLedgerInfo) -> None:
    async def deletes() -> None:
        assert (await parts.engine.verify(request)).decision == Decision.DELETE

    await assert_eventually(deletes, timeout=40, interval=0.3)


async def test_zookeeper_stopped_is_retry_then_recovers(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """With ZooKeeper down every verdict is RETRY naming ZooKeeper (the deleter pauses on it);
    when it is back, verdicts resume."""
    await world.ledger(1)
    zk.stop()
    verdict = await parts.engine.verify(pdli(1))
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "unavailable_zookeeper")
    zk.start()
    await eventually_delete(parts, pdli(1))


async def test_zookeeper_stopping_mid_verdict_is_retry(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """Verdicts in flight when the server goes away end in RETRY, none in DELETE."""
    for ledger_id in range(1, 51):
        await world.ledger(ledger_id)
    tasks = [asyncio.create_task(parts.engine.verify(pdli(n))) for n in range(1, 51)]
    await asyncio.sleep(0)
    zk.stop()
    verdicts = await asyncio.gather(*tasks)
    zk.start()
    retried = sum(v.decision is Decision.RETRY for v in verdicts)
    deleted = sum(v.decision is Decision.DELETE for v in verdicts)
    assert (retried + deleted, retried > 0) == (50, True)


async def test_session_expiry_is_retry_then_recovers(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """A frozen server (the session expires) gives RETRY; afterwards a new session serves."""
    await world.ledger(1)
    await world.ml([2])
    await parts.engine.verify(pdli(1))
    zk.pause()
    try:
        await asyncio.sleep(5)  # past the 4 s session timeout
        verdict = await parts.engine.verify(pdli(1))
    finally:
        zk.resume()
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "unavailable_zookeeper")
    await eventually_delete(parts, pdli(1))


async def test_s3_down_is_retry_then_recovers(world: World, parts: Any, s3: S3Server) -> None:
    """HEAD failing for any reason other than 404 gives RETRY (naming S3 when it does not answer
    at all); after S3 returns, DELETE."""
    await world.objects(1)
    s3.stop()
    try:
        verdict = await parts.engine.verify(pdli(1, **OFFLOAD))
    finally:
        s3.start()
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "unavailable_s3")
    world.forget_buckets()  # moto forgets everything when it restarts
    await world.objects(1)
    await eventually_delete(parts, pdli(1, **OFFLOAD))


async def test_missing_bucket_is_retry_not_absence(world: World, parts: Any) -> None:
    """An allowed bucket that does not exist (a misconfiguration) is RETRY, never NOT_FOUND, and
    not an outage: S3 answered."""
    await world.ml([2])
    verdict = await parts.engine.verify(pdli(1, **OFFLOAD))
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "unavailable")
