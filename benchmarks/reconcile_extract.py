"""Reconciler extract rate: the Spark extract job on local[2] vs raw aiozk reads (single gets
and multiRead) of the same ledger znodes, in the same run.

    .venv/bin/python -m benchmarks.reconcile_extract [--ledgers 200000] [--rounds 2] [--smoke]

Starts its own ZooKeeper, writes the ledger znodes through the metadata layer (half on the
short path, half on the long one, Pulsar custom metadata, bounded concurrency), then
alternates rounds: raw aiozk `get` of every ledger znode (paths known, no listing, 128 in
flight), raw multiRead of the same znodes (aiozk sending the request itself, 256 paths a
request as the extract batches them, 4 in flight) and the whole extract job (driver
listing, one task per subtree each with its own session listing its subtree, reading it
in multiRead batches and decoding, Parquet written). Prints the rates and the median
per-round ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from statistics import median

import aiozk

from benchmarks._pool import run_pool
from benchmarks._spark import SMOKE_MASTER, SMOKE_OVERRIDES
from benchmarks._truth import parse, require, require_count, run
from benchmarks.metadata_read import ledger_ids, populate
from devstack.zookeeper import ZooKeeperServer
from services.metadata import BookKeeperLedgers, ZkMetadataStore
from services.metadata.store import Versioned
from services.metadata.zookeeper.store import MULTI_READ_CHUNK
from services.metadata.zookeeper.wire import MultiReadRequest
from services.scan.extract.job import run_extract
from services.scan.extract.units import ExtractSettings
from services.scan.spark import build_session

WRITE_TIMEOUT_S = 1800.0


async def write(address: str, ids: list[int], concurrency: int) -> list[str]:
    async with ZkMetadataStore.connect(address, session_timeout=30.0) as store:
        ledgers = BookKeeperLedgers(store)
        start = time.perf_counter()
        await populate(ledgers, ids, concurrency)
        print(f"wrote {len(ids):,} ledger znodes in {time.perf_counter() - start:.1f}s")
        return [ledgers.path(i) for i in ids]


async def raw_round(address: str, paths: list[str], concurrency: int) -> float:
    raw = aiozk.ZKClient(address, session_timeout=30)
    await raw.start()
    try:
        index = list(range(len(paths)))

        async def read(i: int) -> object:
            return await raw.get(paths[i])

        return await run_pool(index, concurrency, read)
    finally:
        await raw.close()


async def raw_multi_round(address: str, paths: list[str], in_flight: int) -> float:
    raw = aiozk.ZKClient(address, session_timeout=30)
    await raw.start()
    try:
        chunks = [paths[i : i + MULTI_READ_CHUNK] for i in range(0, len(paths), MULTI_READ_CHUNK)]

        async def read(i: int) -> object:
            response = await raw.session.send(MultiReadRequest(chunks[i]))
            found = sum(isinstance(r, Versioned) for r in response.results)
            require_count("raw multiRead znodes read", found, len(chunks[i]))
            return response

        rate = await run_pool(list(range(len(chunks))), in_flight, read)
        return rate * len(paths) / len(chunks)
    finally:
        await raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=128, help="raw reads / writes in flight")
    parser.add_argument("--master", default="local[2]")
    args = parse(parser, {"ledgers": 200, "rounds": 1, "concurrency": 16, "master": SMOKE_MASTER})
    ids = ledger_ids(args.ledgers)
    with ZooKeeperServer() as server, tempfile.TemporaryDirectory() as tmp:
        paths = asyncio.run(asyncio.wait_for(write(server.address, ids, 256), WRITE_TIMEOUT_S))
        spark = build_session(
            args.master,
            overrides=SMOKE_OVERRIDES if args.smoke else {"spark.driver.memory": "6g"},
        )
        settings = ExtractSettings(zookeeper=server.address, cluster="bench", zk_timeout_s=30.0)
        raw_rates: list[float] = []
        multi_rates: list[float] = []
        job_rates: list[float] = []
        read_rates: list[float] = []
        try:
            for index in range(args.rounds):
                raw_rates.append(asyncio.run(raw_round(server.address, paths, args.concurrency)))
                multi_rates.append(asyncio.run(raw_multi_round(server.address, paths, 4)))
                start = time.perf_counter()
                outcome = run_extract(spark, settings, Path(tmp) / f"run-{index}")
                elapsed = time.perf_counter() - start
                rows = sum(
                    int(r["rows"])
                    for r in outcome.manifest
                    if r["kind"] == "bk_ledgers" and not str(r["task_id"]).startswith("list:")
                )
                require_count("ledgers the extract read", rows, len(ids))
                failed = [r for r in outcome.manifest if r["status"] != "ok"]
                require(not failed, f"extract tasks not ok: {failed}")
                tasks = sum(1 for r in outcome.manifest if r["kind"] == "bk_ledgers") - 1
                job_rates.append(rows / elapsed)
                reads = (outcome.ended_ms - outcome.started_ms) / 1000
                read_rates.append(rows / reads)
                print(
                    f"round {index + 1}: raw {raw_rates[-1]:,.0f}/s, raw multiRead "
                    f"{multi_rates[-1]:,.0f}/s, extract {job_rates[-1]:,.0f}"
                    f"/s ({tasks} subtree tasks, {elapsed:.1f}s, of which listing and reading "
                    f"{reads:.1f}s = {read_rates[-1]:,.0f}/s), "
                    f"ratio {job_rates[-1] / raw_rates[-1]:.0%}"
                )
        finally:
            spark.stop()
    ratios = [j / r for j, r in zip(job_rates, raw_rates, strict=True)]
    multi_ratios = [j / r for j, r in zip(job_rates, multi_rates, strict=True)]
    read_ratios = [j / r for j, r in zip(read_rates, multi_rates, strict=True)]
    print(f"ledgers={len(ids)} master={args.master} rounds={args.rounds}")
    print(f"raw aiozk get:        median {median(raw_rates):9,.0f} znodes/s")
    print(f"raw multiRead:        median {median(multi_rates):9,.0f} znodes/s")
    print(f"extract job (Spark):  median {median(job_rates):9,.0f} ledgers/s")
    print(f"  listing and reading: median {median(read_rates):9,.0f} ledgers/s (before Parquet)")
    print(f"ratio to raw get (median of rounds): {median(ratios):.0%}")
    print(f"ratio to raw multiRead (median of rounds): {median(multi_ratios):.0%}")
    print(f"  listing and reading to raw multiRead: {median(read_ratios):.0%}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run(main)
