"""The Oxia adapter's get, get_many, set and delete against the raw `oxia` client's calls.

    .venv/bin/python -m benchmarks.oxia_store [--n 2000] [--shards 3] [--concurrency 16]
        [--threads 16] [--batch 256] [--rounds 3] [--smoke]

Starts a devstack Oxia server, writes N keys (ledger-sized values), then in each round
measures, back to back on the same server: the raw client (`Client.get`, `put` with an
expected version, `delete` with one) called from `--concurrency` threads, and the adapter's
`get`, `get_many` (`--batch` paths a call), `set` and `delete` from `--concurrency` tasks on
a pool of `--threads` threads. Prints the rates, the median per-round ratio to the raw call
and the load average. Every call must succeed: a failed one ends the run (non-zero exit).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from statistics import median
from typing import Any

from benchmarks._pool import Rates, ratio, run_pool
from benchmarks._truth import parse, require, require_count, run
from devstack.oxia import running_in_thread
from services.metadata.oxia import OxiaMetadataStore, _client
from services.metadata.store import Versioned

BENCH_TIMEOUT_S = 600.0
VALUE = b"x" * 300  # about a ledger's metadata


def keys(n: int, round_: int, kind: str) -> list[str]:
    return [f"/bench/{kind}/r{round_}/k{i:06d}" for i in range(n)]


def run_threads(items: list[Any], concurrency: int, work: Callable[[Any], object]) -> float:
    """`work` over every item from `concurrency` threads; items per second."""
    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for _ in pool.map(work, items):
            pass
    return len(items) / (time.perf_counter() - start)


async def one_round(
    store: OxiaMetadataStore, raw: Any, args: argparse.Namespace, index: int
) -> dict[str, float]:
    raw_keys, our_keys = keys(args.n, index, "raw"), keys(args.n, index, "ours")
    for batch in (raw_keys, our_keys):
        await store.create(batch[0], VALUE, make_parents=True)
        created = await asyncio.gather(*(store.create(key, VALUE) for key in batch[1:]))
        require_count("keys created", len(created) + 1, args.n)
    loop = asyncio.get_running_loop()

    def raw_threads(work: Callable[[Any], object], items: list[Any]) -> Awaitable[float]:
        return loop.run_in_executor(None, run_threads, items, args.concurrency, work)

    rates: dict[str, float] = {}
    raw_versions: dict[str, int] = {}

    def raw_get(key: str) -> None:
        _k, value, version = raw.get(key)
        require(value == VALUE, f"raw get {key}: wrong value")
        raw_versions[key] = version.version_id()

    rates["raw get"] = await raw_threads(raw_get, raw_keys)
    ours: dict[str, Versioned] = {}

    async def get(key: str) -> None:
        ours[key] = await store.get(key)

    rates["get"] = await run_pool(our_keys, args.concurrency, get)
    require_count("adapter gets", len(ours), args.n)

    batches = [our_keys[i : i + args.batch] for i in range(0, args.n, args.batch)]

    async def get_many(batch: list[str]) -> None:
        found = [r for r in await store.get_many(batch) if isinstance(r, Versioned)]
        require_count("get_many keys read", len(found), len(batch))

    rates["get_many"] = await run_pool(batches, 1, get_many) * args.n / len(batches)

    def raw_set(key: str) -> None:
        _k, version = raw.put(key, VALUE, expected_version_id=raw_versions[key])
        raw_versions[key] = version.version_id()

    rates["raw put (versioned)"] = await raw_threads(raw_set, raw_keys)

    async def set_(key: str) -> None:
        ours[key] = Versioned(
            VALUE, await store.set(key, VALUE, version=ours[key].version), 0, 0, 0, 0
        )

    rates["set"] = await run_pool(our_keys, args.concurrency, set_)

    def raw_delete(key: str) -> None:
        require(raw.delete(key, expected_version_id=raw_versions[key]), f"raw delete {key}")

    rates["raw delete (versioned)"] = await raw_threads(raw_delete, raw_keys)

    async def delete(key: str) -> None:
        await store.delete(key, version=ours[key].version)

    rates["delete"] = await run_pool(our_keys, args.concurrency, delete)
    left = await store.get_many(raw_keys + our_keys)
    require(all(r is None for r in left), "keys left after the deletes")
    return rates


async def measure(address: str, args: argparse.Namespace) -> Rates:
    raw = await asyncio.to_thread(
        _client.open_client, address, "default", 30_000, 30.0, lambda _session: None
    )
    try:
        async with OxiaMetadataStore.connect(
            address, session_timeout=30.0, request_timeout=30.0, max_threads=args.threads
        ) as store:
            rates: Rates = {}
            for index in range(args.rounds):
                round_rates = await one_round(store, raw, args, index)
                for name, rate in round_rates.items():
                    rates.setdefault(name, []).append(rate)
                line = ", ".join(f"{name} {rate:,.0f}/s" for name, rate in round_rates.items())
                print(f"round {index + 1}: {line}")
            return rates
    finally:
        await asyncio.to_thread(raw.close)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="keys per client per round")
    parser.add_argument("--shards", type=int, default=3, help="shards of the devstack server")
    parser.add_argument("--concurrency", type=int, default=16, help="calls in flight")
    parser.add_argument("--threads", type=int, default=16, help="the adapter's thread pool")
    parser.add_argument("--batch", type=int, default=256, help="paths per get_many call")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each client in turn")
    args = parse(parser, {"n": 100, "rounds": 1, "batch": 50})
    with running_in_thread(shards=args.shards) as server:
        rates = asyncio.run(asyncio.wait_for(measure(server.address, args), BENCH_TIMEOUT_S))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"keys={args.n} shards={args.shards} concurrency={args.concurrency} "
        f"threads={args.threads} batch={args.batch} rounds={args.rounds}; load average {load}"
    )
    for name, values in rates.items():
        print(f"{name:24s} best {max(values):8,.0f}  median {median(values):8,.0f} calls/s")
    for name, base in (
        ("get", "raw get"),
        ("get_many", "raw get"),
        ("set", "raw put (versioned)"),
        ("delete", "raw delete (versioned)"),
    ):
        print(f"{name} / {base}: {ratio(rates, name, base):.0%} (median of rounds)")


if __name__ == "__main__":
    run(main)
