"""Believed set at scale: single-ledger Believe calls and a 1M-entry set, beside raw creates.

    .venv/bin/python -m benchmarks.believed [--calls 100000] [--concurrency 256]
        [--entries 1000000] [--call-size 1000] [--smoke]

Starts its own ZooKeeper, then, in one run:
- raw: `aiozk.ZKClient.create` of `--calls` znodes of 24 bytes (the size of a one-entry
  batch), `--concurrency` in flight: the client's own create rate on this machine;
- Believe: `--calls` calls of `BelievedSet.add([key])` (one ledger each), `--concurrency`
  in flight, through the metadata layer on a real session (group commit included): time,
  calls/s, batch znodes and bytes written, the largest children list;
- a set of `--entries` entries written by calls of `--call-size` keys, then loaded by a
  fresh replica in a separate process (so its memory is the set's alone): load time, memory
  (resident set growth), znodes, bytes, the largest children list.
The ratio Believe calls/s ÷ raw creates/s is printed first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import aiozk

from benchmarks._pool import run_pool
from benchmarks._truth import UndoneWork, parse, require_count, run
from devstack.zookeeper import ZooKeeperServer
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.believed import LAYOUT, BelievedConfig, BelievedSet
from services.verifier.store_adapter import MetadataZnodeStore

BENCH_TIMEOUT_S = 1800.0
CALLS_ROOT = "/bench/calls"
SET_ROOT = "/bench/set"


class CountingStore(MetadataZnodeStore):
    """The real store, counting the batch znodes and bytes the set writes."""

    def __init__(self, store: ZkMetadataStore) -> None:
        super().__init__(store)
        self.znodes = 0
        self.bytes = 0

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        path = await super().create_sequential(prefix, data)
        self.znodes += 1
        self.bytes += len(data)
        return path


def config(root: str, entries: int) -> BelievedConfig:
    return BelievedConfig(root=root, max_entries=entries, max_age=timedelta(hours=24))


def make_keys(count: int, seed: int) -> list[int]:
    """Identity keys as `identity_key` builds them: the ledger id, then a 64-bit digest."""
    rng = random.Random(seed)
    return [(ledger_id << 64) | rng.getrandbits(64) for ledger_id in range(1, count + 1)]


async def seconds_of(
    count: int, concurrency: int, work: Callable[[int], Awaitable[object]]
) -> float:
    """Run `work(0..count-1)` with `concurrency` workers (`_pool.run_pool`); the seconds taken."""
    return count / await run_pool(range(count), concurrency, work)


async def raw_creates(address: str, count: int, concurrency: int) -> float:
    client = aiozk.ZKClient(address, session_timeout=30)
    await client.start()
    try:
        await client.ensure_path("/raw")
        data = b"\0" * 24

        async def create(number: int) -> None:
            await client.create(f"/raw/n{number}", data)

        return await seconds_of(count, concurrency, create)
    finally:
        await client.close()


@dataclass
class Layout:
    buckets: int
    batches: int
    largest_bucket: int


async def layout(store: ZkMetadataStore, root: str) -> Layout:
    names = await store.get_children(f"{root}/{LAYOUT}")
    sizes = [len(await store.get_children(f"{root}/{LAYOUT}/{name}")) for name in names]
    return Layout(len(names), sum(sizes), max(sizes, default=0))


async def believe_calls(store: ZkMetadataStore, count: int, concurrency: int) -> dict[str, float]:
    counted = CountingStore(store)
    believed = BelievedSet(counted, config(CALLS_ROOT, count))
    keys = make_keys(count, seed=1)

    async def call(number: int) -> None:
        await believed.add([keys[number]])

    seconds = await seconds_of(count, concurrency, call)
    require_count("single-ledger Believe calls held", len(believed), count)
    shape = await layout(store, CALLS_ROOT)
    believed.close()
    return {
        "seconds": seconds,
        "znodes": counted.znodes,
        "bytes": counted.bytes,
        "buckets": shape.buckets,
        "largest_list": max(shape.largest_bucket, shape.buckets),
    }


async def write_set(store: ZkMetadataStore, entries: int, call_size: int) -> dict[str, float]:
    counted = CountingStore(store)
    believed = BelievedSet(counted, config(SET_ROOT, entries))
    keys = make_keys(entries, seed=2)
    calls = [keys[i : i + call_size] for i in range(0, entries, call_size)]

    async def call(number: int) -> None:
        await believed.add(calls[number])

    seconds = await seconds_of(len(calls), 16, call)
    require_count("entries of the big set held", len(believed), entries)
    shape = await layout(store, SET_ROOT)
    believed.close()
    return {
        "write_seconds": seconds,
        "znodes": counted.znodes,
        "bytes": counted.bytes,
        "buckets": shape.buckets,
        "largest_list": max(shape.largest_bucket, shape.buckets),
    }


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def load_fresh(address: str, entries: int) -> dict[str, float]:
    """A fresh replica's load (run in its own process by `--load-only`)."""
    async with ZkMetadataStore.connect(address, session_timeout=30.0) as store:
        believed = BelievedSet(MetadataZnodeStore(store), config(SET_ROOT, entries))
        before = rss_kib()
        start = time.perf_counter()
        await believed.refresh()
        seconds = time.perf_counter() - start
        grown = rss_kib() - before
        require_count("entries a fresh replica loaded", len(believed), entries)
        believed.close()
    return {"load_seconds": seconds, "rss_mib": grown / 1024, "loaded": len(believed)}


async def load_in_child(address: str, entries: int) -> dict[str, float]:
    """`load_fresh` in a new process: its resident memory then holds the set and no more."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "benchmarks.believed", "--load-only", address),
        *("--entries", str(entries)),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _err = await child.communicate()
    if child.returncode != 0:
        raise UndoneWork(f"fresh replica failed with exit code {child.returncode}")
    result: dict[str, float] = json.loads(out.decode().splitlines()[-1])
    return result


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


async def measure(address: str, args: argparse.Namespace) -> None:
    print(f"load average at start: {loadavg()}")
    raw_seconds = await raw_creates(address, args.calls, args.concurrency)
    async with ZkMetadataStore.connect(address, session_timeout=30.0) as store:
        calls = await believe_calls(store, args.calls, args.concurrency)
        written = await write_set(store, args.entries, args.call_size)
    loaded = await load_in_child(address, args.entries)
    raw_rate = args.calls / raw_seconds
    rate = args.calls / calls["seconds"]
    print(
        f"ratio: {rate / raw_rate:.1f}x — {rate:,.0f} Believe calls/s vs {raw_rate:,.0f} "
        f"raw aiozk creates/s ({args.calls:,} each, {args.concurrency} in flight)"
    )
    print(f"raw creates: {args.calls:,} znodes in {raw_seconds:.1f} s")
    print(
        f"Believe: {args.calls:,} single-ledger calls in {calls['seconds']:.1f} s "
        f"({rate:,.0f}/s); {calls['znodes']:,.0f} batch znodes, {calls['bytes']:,.0f} bytes "
        f"({calls['bytes'] / args.calls:.1f} B/call); {calls['buckets']:.0f} buckets, "
        f"largest children list {calls['largest_list']:.0f}"
    )
    print(
        f"{args.entries:,}-entry set: written by {args.entries // args.call_size:,} calls of "
        f"{args.call_size} in {written['write_seconds']:.1f} s; {written['znodes']:,.0f} batch "
        f"znodes, {written['bytes']:,.0f} bytes; {written['buckets']:.0f} buckets, largest "
        f"children list {written['largest_list']:.0f}"
    )
    print(
        f"fresh replica: loaded {loaded['loaded']:,} entries in {loaded['load_seconds']:.2f} s, "
        f"resident memory +{loaded['rss_mib']:.0f} MiB "
        f"({loaded['rss_mib'] * 2**20 / args.entries:.0f} B/entry)"
    )
    print(f"load average at end: {loadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000, help="single-ledger Believe calls")
    parser.add_argument("--concurrency", type=int, default=256, help="calls/creates in flight")
    parser.add_argument("--entries", type=int, default=1_000_000, help="entries of the big set")
    parser.add_argument("--call-size", type=int, default=1_000, help="keys per call (big set)")
    parser.add_argument("--load-only", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parse(parser, {"calls": 200, "concurrency": 32, "entries": 2000, "call_size": 100})
    if args.load_only:
        result = asyncio.run(load_fresh(args.load_only, args.entries))
        print(json.dumps(result))
        return
    with ZooKeeperServer() as server:
        asyncio.run(asyncio.wait_for(measure(server.address, args), BENCH_TIMEOUT_S))


if __name__ == "__main__":
    run(main)
