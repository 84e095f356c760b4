"""Shadow-topic scan: the verifier's full scan (`ShadowIndex.scan`) vs raw aiozk, and what a
fresh intent then waits.

    .venv/bin/python -m benchmarks.shadow_scan [--mls 20000] [--rounds 3] [--gap 5] [--smoke]

Starts its own ZooKeeper and writes `--mls` managed-ledger znodes (every 100th a shadow
topic of another, `PULSAR.SHADOW_SOURCE`) in 10 namespaces. Each round times one scan through
the verifier's index (the `ManagedLedgers` walk, then every ML read and decoded, 64 reads in
flight) and one raw pass (aiozk listing the same tree and reading every znode, 64 in
flight). Prints both rates, the median ratio, and the cost of the freshness rule at `--gap`
(TOMBSTONE_VERIFIER_SHADOW_SCAN_MIN_GAP): under a steady flow of fresh data-ledger intents the
scans run back to back, one per max(gap, scan time), so ZooKeeper serves
MLs / max(gap, scan) reads per second, and an intent waits about gap + scan before its
DELETE.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Iterator
from statistics import median

import aiozk

from benchmarks._truth import parse, require_count, run
from devstack.zookeeper import ZooKeeperServer
from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    ManagedLedgerInfo,
    encode_managed_ledger_info,
)
from services.metadata.pulsar_stores import ManagedLedgers
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.shadows import ShadowIndex
from services.verifier.store_adapter import MetadataZnodeStore

ROOT = "/managed-ledgers"
CONCURRENCY = 64


def ml_paths(n: int) -> Iterator[tuple[str, bytes]]:
    for i in range(n):
        info = ManagedLedgerInfo()
        for k in range(4):
            info.ledgerInfo.add(ledgerId=i * 4 + k, entries=10, size=1000, timestamp=1)
        if i % 100 == 99:
            source = f"persistent://public/ns-{(i - 1) % 10}/topic-{i - 1}"
            info.properties.add(key=SHADOW_SOURCE, value=source)
        yield f"{ROOT}/public/ns-{i % 10}/persistent/topic-{i}", encode_managed_ledger_info(info)


async def seed(store: ZkMetadataStore, n: int) -> None:
    limit = asyncio.Semaphore(256)

    async def put(path: str, data: bytes) -> None:
        async with limit:
            await store.create(path, data, make_parents=True)

    async with asyncio.TaskGroup() as group:
        for path, data in ml_paths(n):
            group.create_task(put(path, data))


async def raw_pass(client: aiozk.ZKClient) -> int:
    """List the tree level by level and read every ML znode, `CONCURRENCY` in flight."""
    paths: list[str] = []
    for tenant in await client.get_children(ROOT):
        for ns in await client.get_children(f"{ROOT}/{tenant}"):
            base = f"{ROOT}/{tenant}/{ns}/persistent"
            paths += [f"{base}/{topic}" for topic in await client.get_children(base)]
    limit = asyncio.Semaphore(CONCURRENCY)

    async def read(path: str) -> None:
        async with limit:
            await client.get_data(path)

    async with asyncio.TaskGroup() as group:
        for path in paths:
            group.create_task(read(path))
    return len(paths)


async def main(args: argparse.Namespace) -> None:
    with ZooKeeperServer() as zk:
        async with ZkMetadataStore.connect(zk.address, request_timeout=30.0) as store:
            await seed(store, args.mls)
            index = ShadowIndex(
                MetadataZnodeStore(store), ManagedLedgers(store).managed_ledger_names
            )
            client = aiozk.ZKClient(zk.address)
            await client.start()
            ours_rates, raw_rates, ratios, scans = [], [], [], []
            try:
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    await index.scan()
                    ours = time.perf_counter() - started
                    started = time.perf_counter()
                    read = await raw_pass(client)
                    raw = time.perf_counter() - started
                    require_count("MLs the verifier's scan read", index.scanned_mls, args.mls)
                    require_count("MLs the raw pass read", read, args.mls)
                    scans.append(ours)
                    ours_rates.append(args.mls / ours)
                    raw_rates.append(args.mls / raw)
                    ratios.append(raw / ours)
            finally:
                await client.close()
    scan = median(scans)
    print(
        f"shadow_scan: {args.mls} MLs, {len(index.shadows_of('public/ns-8/persistent/topic-98'))} "
        f"shadow of topic-98, {args.rounds} rounds, load {os.getloadavg()[0]:.2f}"
    )
    print(f"  ratio to raw aiozk (median): {median(ratios):.2f}")
    print(
        f"  ours: {median(ours_rates):,.0f} MLs/s (scan {scan:.2f} s); "
        f"raw: {median(raw_rates):,.0f} MLs/s"
    )
    period = max(args.gap, scan)
    print(
        f"  steady flow of fresh intents at gap {args.gap:g} s: one scan per {period:.2f} s, "
        f"{args.mls / period:,.0f} ZooKeeper reads/s; an intent waits about "
        f"{args.gap + scan:.1f} s before its DELETE"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mls", type=int, default=20_000, help="managed ledgers to write")
    parser.add_argument("--rounds", type=int, default=3, help="scans timed (median reported)")
    parser.add_argument("--gap", type=float, default=5.0, help="minimum scan gap, seconds")
    args = parse(parser, {"mls": 200, "rounds": 1})
    run(lambda: asyncio.run(main(args)))
