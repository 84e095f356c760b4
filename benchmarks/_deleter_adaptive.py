"""`benchmarks.deleter --adaptive`: the adaptive ZooKeeper limit against static ones.

For each setting, a fresh deleter process deletes `ledgers` ledger znodes (one PDLI each),
while a probe client writes one znode in a loop, as a broker updates its managed ledgers'
znodes, and records the latency: a write goes through ZooKeeper's commit pipeline behind the
deleter's multis (a read from another session need not wait for them).
The static settings (floor = ceiling) are swept; the adaptive run has floor 1 and the
largest of them as its ceiling. Reported: acknowledgements per second of each run, the
adaptive run against the best static one, and the probe's p99 under the adaptive deleter
against the over-set static one (the ceiling used as a fixed limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import aiozk

from benchmarks._deleter_stack import (
    deleter_child,
    encode,
    metric,
    pdli,
    publish,
    rate_until,
    write_ledgers,
)
from benchmarks._truth import UndoneWork
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer

PROBE_PATH = "/bench-probe"
"""The znode the probe writes back to back."""


@dataclass(frozen=True)
class Run:
    name: str
    limit: str
    """`k` for a static limit of k, `1..k` for the adaptive one."""
    rate: float
    """Acknowledged PDLIs per second."""
    p99_ms: float
    """The probe's p99 write latency during the run."""
    final_limit: float
    """The concurrency-limit gauge at the end of the run."""


async def probe(address: str, latencies: list[float], stop: asyncio.Event) -> None:
    """Write `PROBE_PATH` back to back until `stop`, recording each latency in seconds."""
    client = aiozk.ZKClient(address)
    await client.start()
    try:
        if not await client.exists(PROBE_PATH):
            await client.create(PROBE_PATH, b"0")
        while not stop.is_set():
            started = time.perf_counter()
            await client.set_data(PROBE_PATH, b"1", force=True)
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.002)
    finally:
        await client.close()


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


async def one_run(
    parts: tuple[ZooKeeperServer, S3Server, PulsarBrokerProcess, str],
    name: str,
    ids: range,
    low: int,
    high: int,
    workdir: str,
) -> Run:
    zk, s3, broker, verifier = parts
    await write_ledgers(zk, ids)
    await publish(broker, encode(pdli(i) for i in ids))
    env = {
        "TOMBSTONE_DELETER_ZOOKEEPER_CONCURRENCY": str(high),
        "TOMBSTONE_DELETER_ZOOKEEPER_CONCURRENCY_MIN": str(low),
    }
    log = Path(workdir) / f"{name}.log"
    child, port = deleter_child(zk, s3, broker, verifier, log, extra=env)
    latencies: list[float] = []
    stop = asyncio.Event()
    prober = asyncio.create_task(probe(zk.address, latencies, stop))
    await child.start()
    try:
        rate = await rate_until(port, len(ids), timeout=600)
        gauge = await asyncio.to_thread(
            metric, port, 'tombstone_deleter_concurrency_limit{resource="zookeeper"}'
        )
        # Acknowledgements that were not deletions (dead letters, skips) would make the rate
        # that of something else.
        deleted = await asyncio.to_thread(metric, port, "tombstone_deleter_deleted_total")
        dead = await asyncio.to_thread(metric, port, "tombstone_deleter_dead_lettered_total")
        if dead or deleted < len(ids):
            raise UndoneWork(
                f"the {name} run deleted {deleted:.0f} of {len(ids)} and dead-lettered "
                f"{dead:.0f} (see {child.log})"
            )
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await prober
        await child.stop()
    limit = str(high) if low == high else f"{low}..{high}"
    return Run(name, limit, rate, p99(latencies) * 1000, gauge)


async def sweep(
    parts: tuple[ZooKeeperServer, S3Server, PulsarBrokerProcess, str],
    ledgers: int,
    levels: list[int],
    workdir: str,
) -> list[Run]:
    """A warm-up run (discarded: the first run in a fresh ZooKeeper and broker is slow), the
    static runs at each level, then the adaptive run (floor 1, ceiling the highest level),
    each on ledgers of its own."""
    runs = []
    base = 100_000_000
    print(f"warm-up: {ledgers // 2} ledgers...", flush=True)
    warm = range(base - ledgers // 2, base)
    await one_run(parts, "warm-up", warm, max(levels), max(levels), workdir)
    for index, level in enumerate([*levels, 0]):
        ids = range(base + index * ledgers, base + (index + 1) * ledgers)
        low, high = (level, level) if level else (1, max(levels))
        name = f"static-{level}" if level else "adaptive"
        print(f"{name}: {ledgers} ledgers, ZooKeeper concurrency {low}..{high}...", flush=True)
        runs.append(await one_run(parts, name, ids, low, high, workdir))
    return runs


def report(runs: list[Run], ledgers: int) -> None:
    statics = [r for r in runs if r.name != "adaptive"]
    adaptive = next(r for r in runs if r.name == "adaptive")
    best = max(statics, key=lambda r: r.rate)
    over = max(statics, key=lambda r: int(r.limit))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(f"adaptive / best static throughput: {adaptive.rate / best.rate:.2f} (target >= 0.90)")
    print(
        f"probe p99 adaptive / over-set static ({over.limit}): "
        f"{adaptive.p99_ms / over.p99_ms:.2f} (target < 1)"
    )
    print()
    print(f"{ledgers} ledgers per run; load average {load}")
    print("| run | ZooKeeper limit | PDLIs/s | probe p99 (ms) | limit at the end |")
    print("| --- | --- | --- | --- | --- |")
    for r in runs:
        print(f"| {r.name} | {r.limit} | {r.rate:.0f} | {r.p99_ms:.1f} | {r.final_limit:.0f} |")
