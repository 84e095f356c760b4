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

Each round also times one extract task alone, in this process and without Spark: the task
body (`job.run_partition`) on one full subtree (`--task-unit`, 10,000 ledgers), from its own
session and listing to the Arrow batches it hands to the JVM, against raw multiRead of the
same subtree's znodes (256 a request, 4 in flight), back to back. `--skip-job` times only
that pair.
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
import pyarrow as pa
from pyspark.sql import SparkSession

from benchmarks._pool import Rates, ratio, run_pool
from benchmarks._spark import SMOKE_MASTER, SMOKE_OVERRIDES
from benchmarks._truth import parse, require, require_count, run
from benchmarks.metadata_read import ledger_ids, populate
from devstack.zookeeper import ZooKeeperServer
from services.metadata import BookKeeperLedgers, ZkMetadataStore
from services.metadata.store import Versioned
from services.metadata.zookeeper.store import MULTI_READ_CHUNK
from services.metadata.zookeeper.wire import MultiReadRequest
from services.scan.extract.job import run_extract, run_partition
from services.scan.extract.units import BK, ExtractSettings, Unit
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


def task_round(settings: ExtractSettings, scope: str, expected: int) -> float:
    """One extract task's body in this process: ledgers per second of wall time."""
    index = [pa.record_batch([pa.array([0], pa.int64())], names=["id"])]
    start = time.perf_counter()
    batches = list(run_partition(settings, [Unit(BK, scope)], index))
    elapsed = time.perf_counter() - start
    ledgers = sum(int(b.num_rows) for b in batches if b.column("bk_ledgers").null_count == 0)
    require_count("ledgers one task read", ledgers, expected)
    return ledgers / elapsed


def unit_paths_of(paths: list[str], scope: str) -> list[str]:
    """The ledger znodes of one subtree (what its task reads)."""
    return [p for p in paths if p.startswith(f"/ledgers/{scope}/")]


def job_round(spark: SparkSession, settings: ExtractSettings, out: Path, ids: int) -> Rates:
    """The whole extract job: ledgers per wall second, and per second of listing + reading."""
    start = time.perf_counter()
    outcome = run_extract(spark, settings, out)
    elapsed = time.perf_counter() - start
    rows = sum(
        int(r["rows"])
        for r in outcome.manifest
        if r["kind"] == "bk_ledgers" and not str(r["task_id"]).startswith("list:")
    )
    require_count("ledgers the extract read", rows, ids)
    failed = [r for r in outcome.manifest if r["status"] != "ok"]
    require(not failed, f"extract tasks not ok: {failed}")
    reads = (outcome.ended_ms - outcome.started_ms) / 1000
    return {"job": [rows / elapsed], "read": [rows / reads], "seconds": [elapsed, reads]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=128, help="raw reads / writes in flight")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--task-unit", default="00/0001", help="the subtree one task reads")
    parser.add_argument("--skip-job", action="store_true", help="time one task only (no Spark)")
    smoke = {"ledgers": 200, "rounds": 1, "concurrency": 16, "master": SMOKE_MASTER}
    args = parse(parser, {**smoke, "task_unit": "00/0000"})
    ids = ledger_ids(args.ledgers)
    rates: Rates = {k: [] for k in ("raw", "multi", "job", "read", "task", "task_multi")}
    with ZooKeeperServer() as server, tempfile.TemporaryDirectory() as tmp:
        paths = asyncio.run(asyncio.wait_for(write(server.address, ids, 256), WRITE_TIMEOUT_S))
        task_paths = unit_paths_of(paths, args.task_unit)
        require(bool(task_paths), f"no ledger below {args.task_unit}")
        settings = ExtractSettings(zookeeper=server.address, cluster="bench", zk_timeout_s=30.0)
        spark = None
        if not args.skip_job:
            overrides = SMOKE_OVERRIDES if args.smoke else {"spark.driver.memory": "6g"}
            spark = build_session(args.master, overrides=overrides)
        try:
            for index in range(args.rounds):
                rates["task_multi"].append(
                    asyncio.run(raw_multi_round(server.address, task_paths, 4))
                )
                rates["task"].append(task_round(settings, args.task_unit, len(task_paths)))
                print(
                    f"round {index + 1}: one task {rates['task'][-1]:,.0f} ledgers/s, raw "
                    f"multiRead of its znodes {rates['task_multi'][-1]:,.0f}/s, ratio "
                    f"{rates['task'][-1] / rates['task_multi'][-1]:.0%}"
                )
                if spark is None:
                    continue
                rates["raw"].append(asyncio.run(raw_round(server.address, paths, args.concurrency)))
                rates["multi"].append(asyncio.run(raw_multi_round(server.address, paths, 4)))
                job = job_round(spark, settings, Path(tmp) / f"run-{index}", len(ids))
                rates["job"] += job["job"]
                rates["read"] += job["read"]
                took, reads = job["seconds"]
                print(
                    f"  raw {rates['raw'][-1]:,.0f}/s, raw multiRead {rates['multi'][-1]:,.0f}/s,"
                    f" extract job {rates['job'][-1]:,.0f}/s ({took:.1f}s, of which listing and "
                    f"reading {reads:.1f}s = {rates['read'][-1]:,.0f}/s)"
                )
        finally:
            if spark is not None:
                spark.stop()
    report(rates, len(ids), args, len(task_paths))


def report(rates: Rates, ids: int, args: argparse.Namespace, task_ledgers: int) -> None:
    print(f"ledgers={ids} master={args.master} rounds={args.rounds}")
    print(f"one task ({args.task_unit}, {task_ledgers:,} ledgers, no Spark):")
    print(f"  raw multiRead of its znodes: median {median(rates['task_multi']):9,.0f} znodes/s")
    print(f"  extract task:                median {median(rates['task']):9,.0f} ledgers/s")
    print(
        f"  ratio task / raw multiRead (median of rounds): {ratio(rates, 'task', 'task_multi'):.0%}"
    )
    if rates["job"]:
        print(f"raw aiozk get:        median {median(rates['raw']):9,.0f} znodes/s")
        print(f"raw multiRead:        median {median(rates['multi']):9,.0f} znodes/s")
        print(f"extract job (Spark):  median {median(rates['job']):9,.0f} ledgers/s")
        print(
            f"  listing and reading: median {median(rates['read']):9,.0f} ledgers/s "
            "(before Parquet)"
        )
        print(f"ratio job / raw get (median of rounds): {ratio(rates, 'job', 'raw'):.0%}")
        print(f"ratio job / raw multiRead (median of rounds): {ratio(rates, 'job', 'multi'):.0%}")
        print(f"  listing and reading / raw multiRead: {ratio(rates, 'read', 'multi'):.0%}")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    run(main)
