"""Simulator write rate: ledgers and objects per second vs the raw clients, same run.

    .venv/bin/python -m benchmarks.simulator_write [--tenants 10] [--objects 400] [--smoke]

Starts its own ZooKeeper and S3. ZooKeeper side: writes a cluster of about 100,000 ledgers
(filesystem offloads, so no objects) through `write_cluster`, and times its ledger phase
(per ledger: id allocation create + delete, then the ledger znode, through the metadata
store); then does the same three operations per ledger with raw aiozk on the same
pre-encoded bytes and the same concurrency. S3 side: the simulator's object phase on a
smaller S3 cluster vs raw aiobotocore `put_object` of the same bodies and metadata.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import aiozk
from aiobotocore.session import get_session

from benchmarks._truth import parse, require, require_count, run
from devstack.s3 import S3Server
from devstack.simulator import blobs
from devstack.simulator.model import ClusterModel
from devstack.simulator.s3 import open_object_store
from devstack.simulator.spec import ClusterSpec, OffloadDriver
from devstack.simulator.writer import write_cluster
from devstack.zookeeper import ZooKeeperServer
from services.metadata import LedgerPaths, ZkMetadataStore, encode_ledger_metadata

CONCURRENCY = 128
T = TypeVar("T")


class PhaseTimer:
    """Progress callback recording when each phase starts and ends."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        if done == 0:
            self.started[phase] = time.perf_counter()
        if done == total:
            self.seconds[phase] = time.perf_counter() - self.started[phase]


async def bounded(items: Iterable[T], work: Callable[[T], Awaitable[Any]]) -> float:
    """Run `work` over `items` with CONCURRENCY workers; return the elapsed seconds."""
    iterator = iter(items)

    async def worker() -> None:
        for item in iterator:
            await work(item)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - started


async def raw_zookeeper(address: str, model: ClusterModel) -> float:
    """The writer's per-ledger operations with raw aiozk under `/raw`; returns seconds."""
    paths = LedgerPaths(root="/raw/ledgers")
    ledgers = [led for _, led in sorted(model.ledgers.items())]
    data = {led.ledger_id: encode_ledger_metadata(led.metadata) for led in ledgers}
    in_bk = {led.ledger_id for led in ledgers if led.in_bookkeeper}
    client = aiozk.ZKClient(address)
    await client.start()
    try:
        await client.ensure_path("/raw/ledgers/idgen")
        for parent in sorted({paths.ledger_path(i).rsplit("/", 1)[0] for i in data}):
            await client.ensure_path(parent)

        async def one(ledger_id: int) -> None:
            node = f"/raw/ledgers/idgen/ID-{ledger_id:010d}"
            await client.create(node)
            await client.delete(node)
            if ledger_id in in_bk:
                await client.create(paths.ledger_path(ledger_id), data=data[ledger_id])

        return await bounded(sorted(data), one)
    finally:
        await client.close()


async def zookeeper_side(tenants: int, namespaces: int, topics: int) -> None:
    spec = ClusterSpec(
        tenants=tenants,
        namespaces_per_tenant=namespaces,
        topics_per_namespace=topics,
        ledgers_per_topic=(10, 20),
        offload_driver=OffloadDriver.FILESYSTEM,
    )
    timer = PhaseTimer()
    with ZooKeeperServer() as zk:
        async with ZkMetadataStore.connect(zk.address) as store:
            started = time.perf_counter()
            model = await write_cluster(
                spec, store=store, s3_client=None, concurrency=CONCURRENCY, progress=timer
            )
            total = time.perf_counter() - started
        written = sum(1 for led in model.ledgers.values() if led.in_bookkeeper)
        raw_seconds = await raw_zookeeper(zk.address, model)
    # The progress callback saw the phase end only if every ledger of it was written.
    require("ledgers" in timer.seconds, f"the simulator's ledger phase did not finish: {timer}")
    # Per allocated ledger: both sides allocate every id and write the ones still in BK.
    sim_rate = len(model.ledgers) / timer.seconds["ledgers"]
    raw_rate = len(model.ledgers) / raw_seconds
    print(
        f"cluster: {len(model.ledgers)} ledgers ({written} in BK), "
        f"{len(model.managed_ledgers)} MLs, {len(model.cursors)} cursors; "
        f"whole write {total:.1f}s"
    )
    for phase, seconds in timer.seconds.items():
        print(f"  {phase:<20} {seconds:7.2f}s")
    print(
        f"ledgers/s  simulator {sim_rate:8.0f}   raw aiozk {raw_rate:8.0f}   "
        f"ratio {sim_rate / raw_rate:.2f}"
    )


async def s3_side(server: S3Server, objects: int) -> None:
    # Sized so that about `objects` objects are written (2 per offloaded ledger).
    spec = ClusterSpec(tenants=max(1, objects // 18), offloaded_share=0.5, bucket="bench")
    timer = PhaseTimer()
    async with throwaway_store() as store, open_object_store(server.client_config()) as s3:
        model = await write_cluster(spec, store=store, s3_client=s3, progress=timer)
    bodies = {key: blobs.object_body(obj) for key, obj in model.objects.items()}
    session = get_session()
    async with session.create_client("s3", **server.client_config()) as client:
        await client.create_bucket(Bucket="raw")

        async def put(key: str) -> None:
            obj = model.objects[key]
            await client.put_object(
                Bucket="raw", Key=key, Body=bodies[key], Metadata=dict(obj.user_metadata)
            )

        raw_seconds = await bounded(sorted(bodies), put)
        for bucket, expected in (("bench", len(model.objects)), ("raw", len(bodies))):
            listed = 0
            async for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                listed += len(page.get("Contents", []))
            require_count(f"objects in bucket {bucket!r}", listed, expected)
    require(bodies, "the simulator wrote no objects")
    sim_rate = len(bodies) / timer.seconds["offloaded objects"]
    raw_rate = len(bodies) / raw_seconds
    print(
        f"objects/s  simulator {sim_rate:8.0f}   raw aiobotocore {raw_rate:8.0f}   "
        f"ratio {sim_rate / raw_rate:.2f}   ({len(bodies)} objects)"
    )


@contextlib.asynccontextmanager
async def throwaway_store() -> AsyncIterator[ZkMetadataStore]:
    """A throwaway ZooKeeper and a store on it, for the S3 side."""
    with ZooKeeperServer() as server:
        async with ZkMetadataStore.connect(server.address) as store:
            yield store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tenants", type=int, default=10, help="10 ≈ 100,000 ledgers")
    parser.add_argument("--objects", type=int, default=400)
    parser.add_argument("--namespaces", type=int, default=10, help="namespaces per tenant")
    parser.add_argument("--topics", type=int, default=40, help="topics per namespace")
    args = parse(parser, {"tenants": 1, "namespaces": 1, "topics": 4, "objects": 36})
    asyncio.run(asyncio.wait_for(zookeeper_side(args.tenants, args.namespaces, args.topics), 600))
    with S3Server() as server:
        asyncio.run(asyncio.wait_for(s3_side(server, args.objects), 300))


if __name__ == "__main__":
    run(main)
