"""Adaptive concurrency through the fault proxies: the deleter's ZooKeeper and S3 limits fall
when the dependency slows down or throttles, come back afterwards, and nothing is lost.

The real parts: ZooKeeper and moto S3 (the deleter reaches them through the fault proxies,
the verifier directly), the devstack broker, the verifier and the deleter in process. The
ledgers are closed Pulsar ledgers of an ML that no longer lists them, with the custom metadata
`LedgerMetadataUtils.buildBaseManagedLedgerMetadata` writes (`application`, `component`,
`pulsar/managed-ledger`); offloaded ones have both objects `BlobStoreManagedLedgerOffloader`
writes (`<uuid>-ledger-<id>` and `-index`, with the `ManagedLedgerName` and
`pulsarclustername` user metadata it sets since 2.10) and `bookkeeperDeleted` set, as
`ManagedLedgerImpl` leaves them after offloading. Assertions are on direction only (fell
below, came back above), never on timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import uuid as _uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta

import boto3

from benchmarks._deleter_stack import (
    BUCKET,
    ML,
    encode,
    offload_keys,
    pdli,
    publish,
    write_ledgers,
)
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.s3_faults import S3FaultProxy
from devstack.simulator._factory import object_user_metadata
from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.core.config import ZooKeeperConfig
from services.deleter.app import build
from services.deleter.config import DeleterConfig, Limits
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import GateSettings
from services.verifier.offload import OffloadPolicy
from tests.deleter.stack import create_topics, deleter_config, running_verifier, s3_config
from tests.deleter_e2e.checks import ledgers_in_zookeeper
from tests.helpers import assert_eventually

ALLOWED = frozenset({BUCKET})


@dataclass
class Limit:
    """The deleter's concurrency-limit gauge of one backend, sampled while the test runs."""

    metrics: DeleterMetrics
    resource: str
    seen: list[int] = field(default_factory=list)

    def now(self) -> int:
        value = self.metrics.registry.get_sample_value(
            "tombstone_deleter_concurrency_limit", {"resource": self.resource}
        )
        return int(value or 0)

    def count(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    async def sample(self) -> None:
        while True:
            self.seen.append(self.now())
            await asyncio.sleep(0.02)


@asynccontextmanager
async def running(config: DeleterConfig, resource: str) -> AsyncIterator[Limit]:
    metrics = DeleterMetrics()
    limit = Limit(metrics, resource)
    async with AsyncExitStack() as stack:
        deleter = await build(stack, config, metrics)
        stop = asyncio.Event()
        pool = asyncio.create_task(deleter.pool.run(stop))
        sampler = asyncio.create_task(limit.sample())
        try:
            yield limit
        finally:
            sampler.cancel()
            stop.set()
            await pool
            with contextlib.suppress(asyncio.CancelledError):
                await sampler


async def until(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    async def holds() -> None:
        assert check(), what

    await assert_eventually(holds, timeout=timeout, interval=0.05)


def settings(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str
) -> DeleterConfig:
    return deleter_config(
        zk,
        s3,
        broker,
        verifier,
        s3_settings=replace(s3_config(s3), allowed_buckets=ALLOWED),
        outage=GateSettings(probe_interval=timedelta(milliseconds=200)),
    )


@asynccontextmanager
async def verifier_for(zk: ZooKeeperServer, s3: S3Server) -> AsyncIterator[str]:
    policy = OffloadPolicy(allowed_buckets=ALLOWED, cluster_name="standalone")
    async with running_verifier(zk, s3, offload=policy) as address:
        yield address


async def fall_and_recover(
    limit: Limit,
    chunks: Sequence[Callable[[], Awaitable[None]]],
    chunk_size: int,
    deleted: Callable[[], float],
    fault: Callable[[], None],
    clear: Callable[[], None],
    *,
    to_floor: bool = False,
) -> tuple[int, int, int]:
    """Chunk 1 with no fault; chunk 2 with the fault until the limit has fallen to half of
    what it reached (`to_floor`: to 1); then the fault is cleared and later chunks go until the
    limit has climbed above where it fell. Each chunk is published and waited for (deleted).
    Returns (reached, fell to, climbed to)."""
    size = 0

    async def run(chunk: Callable[[], Awaitable[None]]) -> None:
        nonlocal size
        await chunk()
        size += chunk_size

    await run(chunks[0])
    await until(lambda: deleted() >= size, "first chunk deleted")
    reached = max(limit.seen)
    fault()
    await run(chunks[1])
    target = 1 if to_floor else max(1, reached // 2)
    await until(lambda: limit.now() <= target, f"falls from {reached} to {target}")
    fell_to = limit.now()
    clear()
    mark = len(limit.seen)
    for chunk in chunks[2:]:
        await run(chunk)
        await until(lambda: deleted() >= size, "chunk deleted", timeout=120)
        if max(limit.seen[mark:]) > fell_to:
            break
    return reached, fell_to, max(limit.seen[mark:])


CHUNK = 200
"""PDLIs per chunk."""


async def test_zookeeper_latency_lowers_the_limit_and_it_recovers(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Replies held 250 ms by the proxy: the ZooKeeper limit falls to half of what it had
    reached or lower; once the proxy is fast again it climbs back; every ledger is deleted
    and nothing is dead-lettered."""
    ids = list(range(1, 5 * CHUNK + 1))
    create_topics(broker)
    await write_ledgers(zk, range(1, len(ids) + 1))
    host, port = zk.address.rsplit(":", 1)
    async with verifier_for(zk, s3) as verifier, ZooKeeperFaultProxy(host, int(port)) as proxy:
        config = replace(
            settings(zk, s3, broker, verifier),
            zookeeper=ZooKeeperConfig(
                servers=proxy.address, operation_timeout=timedelta(seconds=5)
            ),
            zookeeper_limits=Limits(64, 1_000_000, 1),
            zookeeper_delete_batch=2,  # many requests, hence many samples
        )
        chunks = [
            functools.partial(publish, broker, encode(pdli(i) for i in ids[k : k + CHUNK]))
            for k in range(0, len(ids), CHUNK)
        ]
        async with running(config, "zookeeper") as limit:
            reached, fell_to, climbed = await fall_and_recover(
                limit,
                chunks,
                CHUNK,
                lambda: limit.count("tombstone_deleter_deleted_total", tier="bookkeeper"),
                lambda: proxy.slow(0.25, seconds=600),
                lambda: proxy.slow(0.0, seconds=0),
            )
            published = limit.count("tombstone_deleter_deleted_total", tier="bookkeeper")
            dead = limit.count("tombstone_deleter_dead_lettered_total")
    print(f"\nZooKeeper limit: reached {reached}, fell to {fell_to}, climbed to {climbed}")
    assert climbed > fell_to
    assert await ledgers_in_zookeeper(zk, set(ids[: int(published)])) == set()
    assert dead == 0


def objects_in_s3(s3: S3Server) -> list[str]:
    client = boto3.client("s3", **s3.client_config())
    return [item["Key"] for item in client.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


def put_objects(s3: S3Server, keys: list[str]) -> None:
    """Data and index objects with the user metadata Pulsar >= 2.10 writes on both."""
    client = boto3.client("s3", **s3.client_config())
    client.create_bucket(Bucket=BUCKET)

    def put(key: str) -> None:
        role = "index" if key.endswith("-index") else "data"
        metadata = object_user_metadata("standalone", role, ML)
        client.put_object(Bucket=BUCKET, Key=key, Body=b"x", Metadata=metadata)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, keys))


async def test_s3_throttling_lowers_the_limit_and_it_recovers(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """DeleteObjects answered 503 SlowDown until the S3 limit is down to 1 (each throttled
    answer halves it; the deleter also pauses on it and probes); it climbs back once S3
    accepts again, every object of a published PDLI is deleted, nothing is dead-lettered."""
    create_topics(broker)
    await write_ledgers(zk, range(0))  # the ML znode and the ledgers root only
    uuids = {10_000_000 + i: str(_uuid.uuid4()) for i in range(6 * S3_CHUNK)}
    ids = sorted(uuids)
    keys = {i: offload_keys(u, i) for i, u in uuids.items()}
    await asyncio.to_thread(put_objects, s3, [key for ks in keys.values() for key in ks])
    async with verifier_for(zk, s3) as verifier, S3FaultProxy(s3.endpoint) as proxy:
        config = replace(
            settings(zk, s3, broker, verifier),
            s3=replace(s3_config(s3, proxy.endpoint), allowed_buckets=ALLOWED),
            s3_limits=Limits(8, 1_000_000, 1),
            s3_batch_keys=2,  # one ledger per DeleteObjects: many requests
        )
        chunks = [
            functools.partial(
                publish, broker, encode(pdli(i, uuids[i]) for i in ids[k : k + S3_CHUNK])
            )
            for k in range(0, len(ids), S3_CHUNK)
        ]
        async with running(config, "s3") as limit:
            reached, fell_to, climbed = await fall_and_recover(
                limit,
                chunks,
                S3_CHUNK,
                lambda: limit.count("tombstone_deleter_deleted_total", tier="s3"),
                lambda: proxy.fail(status=503, code="SlowDown", operation="DeleteObjects"),
                proxy.clear,
                to_floor=True,
            )
            done = int(limit.count("tombstone_deleter_deleted_total", tier="s3"))
            dead = limit.count("tombstone_deleter_dead_lettered_total")
            throttled = proxy.injected["DeleteObjects"]
    print(f"\nS3 limit: reached {reached}, fell to {fell_to}, climbed to {climbed}")
    assert (throttled > 0, climbed > fell_to) == (True, True)
    left = set(await asyncio.to_thread(objects_in_s3, s3))
    assert left.isdisjoint(key for i in ids[:done] for key in keys[i])
    assert dead == 0


S3_CHUNK = 40
"""Offloaded ledgers per chunk (two objects each)."""


async def test_zookeeper_cut_does_not_leave_the_limit_at_the_floor(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Connections to ZooKeeper cut for 3 s while deletes flow: the deleter pauses on the
    outage and resumes; the deletes that got no answer cut the limit, but the outage is
    forgiven when answers return, so the limit does not stay at the floor. Every ledger is
    deleted and nothing is dead-lettered."""
    ids = list(range(1, 2 * CHUNK + 1))
    create_topics(broker)
    await write_ledgers(zk, range(1, len(ids) + 1))
    host, port = zk.address.rsplit(":", 1)
    async with verifier_for(zk, s3) as verifier, ZooKeeperFaultProxy(host, int(port)) as proxy:
        config = replace(
            settings(zk, s3, broker, verifier),
            zookeeper=ZooKeeperConfig(
                servers=proxy.address, operation_timeout=timedelta(seconds=2)
            ),
            zookeeper_limits=Limits(64, 1_000_000, 1, initial=16),
            zookeeper_delete_batch=2,
        )
        async with running(config, "zookeeper") as limit:
            # A delete applied whose answer was lost is found gone when decided again (SKIP
            # NOT_FOUND): count acknowledgements, not deletes.
            deleted = lambda: limit.count("tombstone_deleter_acknowledged_total")  # noqa: E731
            await publish(broker, encode(pdli(i) for i in ids[:CHUNK]))
            await until(lambda: deleted() >= CHUNK, "first chunk deleted")
            before = limit.now()
            await publish(broker, encode(pdli(i) for i in ids[CHUNK:]))
            await until(lambda: deleted() > CHUNK, "second chunk under way")
            proxy.cut(3.0)
            mark = len(limit.seen)
            await until(lambda: deleted() >= len(ids), "all settled", timeout=60)
            # The limit now as well: the ledgers may all settle before the sampler's next
            # look, which left nothing to judge.
            during = [*limit.seen[mark:], limit.now()]
            dead = limit.count("tombstone_deleter_dead_lettered_total")
            paused = proxy.cuts
    # The highest limit after the lowest point: the limit's own probe halves it every baseline
    # period, and a delete slowed by a loaded machine may cut it again, either of which can
    # come just before the end, so the last sample says nothing about the outage.
    lowest = during.index(min(during))
    after = max(during[lowest:])
    print(f"\nZooKeeper limit: {before} before the cut, lowest {min(during)}, {after} after")
    assert paused == 1
    assert after > max(1, before // 2)  # not left halved or at the floor
    assert await ledgers_in_zookeeper(zk, set(ids)) == set()
    assert dead == 0
