"""Ledger-metadata read rate: `BookKeeperLedgers.read` (decode included) vs raw aiozk, and
`ZkMetadataStore.get_many` (multiRead) vs a raw multiRead.

    .venv/bin/python -m benchmarks.metadata_read [--n 20000] [--concurrency 128] [--rounds 5]
        [--batch 256] [--batches-in-flight 4] [--batch-passes 10] [--smoke]

Starts its own ZooKeeper, writes N ledger znodes (v3 format, Pulsar-like custom metadata,
ids on both sides of 2^31), then reads them all with the same bounded worker pool through
each client, alternating rounds. Batched reads take `--batch` paths per call with
`--batches-in-flight` calls in flight: raw is aiozk sending the multiRead request itself
(no error mapping, no result objects), ours is `get_many`. Prints the rates and the median
per-round ratios. Batched reads go over all N `--batch-passes` times per round.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from statistics import median

import aiozk

from benchmarks._pool import Rates, ratio, run_pool
from benchmarks._truth import parse, require_count, run
from devstack.zookeeper import ZooKeeperServer
from services.metadata import (
    BookKeeperLedgers,
    LedgerMetadata,
    LedgerState,
    Segment,
    ZkMetadataStore,
)
from services.metadata.store import Versioned
from services.metadata.zookeeper.wire import MultiReadRequest

BENCH_TIMEOUT_S = 600.0


def ledger_ids(n: int) -> list[int]:
    """Half short-layout ids, half long-layout ids."""
    half = n // 2
    return [1000 + i for i in range(half)] + [4294967296 + i for i in range(n - half)]


def sample_ledger(ledger_id: int) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        length=5_000_000,
        last_entry_id=49_999,
        segments=(
            Segment(0, ("bookie-1:3181", "bookie-2:3181", "bookie-3:3181")),
            Segment(20_000, ("bookie-1:3181", "bookie-4:3181", "bookie-3:3181")),
        ),
        custom_metadata={
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": b"public/default/persistent/topic-partition-3",
        },
        ctoken=ledger_id * 7919,
    )


async def populate(ledgers: BookKeeperLedgers, ids: list[int], concurrency: int) -> None:
    async def create(ledger_id: int) -> None:
        await ledgers.create(sample_ledger(ledger_id))

    await run_pool(ids, concurrency, create)


async def measure(address: str, args: argparse.Namespace) -> Rates:
    """Per-round read rates of each client; each round reads every ledger once per client."""
    ids = ledger_ids(args.n)
    raw = aiozk.ZKClient(address, session_timeout=30)
    await raw.start()
    try:
        async with ZkMetadataStore.connect(address, session_timeout=30.0) as store:
            ledgers = BookKeeperLedgers(store)
            await populate(ledgers, ids, args.concurrency)
            paths = {ledger_id: ledgers.path(ledger_id) for ledger_id in ids}
            batches = [
                [paths[i] for i in ids[start : start + args.batch]]
                for start in range(0, len(ids), args.batch)
            ]

            async def raw_read(ledger_id: int) -> object:
                return await raw.get(paths[ledger_id])

            async def raw_multi(number: int) -> object:
                response = await raw.session.send(MultiReadRequest(batches[number]))
                found = [r for r in response.results if isinstance(r, Versioned)]
                require_count("raw multiRead znodes read", len(found), len(batches[number]))
                return response

            async def get_many(number: int) -> object:
                results = await store.get_many(batches[number])
                found = [r for r in results if isinstance(r, Versioned)]
                require_count("get_many znodes read", len(found), len(batches[number]))
                return results

            async def batched(work: Callable[[int], Awaitable[object]]) -> float:
                # Batched reads of N znodes take a few tenths of a second: read them
                # `--batch-passes` times so that a round is long enough to measure.
                calls = list(range(len(batches))) * args.batch_passes
                rate = await run_pool(calls, args.batches_in_flight, work)
                return rate * len(ids) / len(batches)

            rates: Rates = {}
            for index in range(args.rounds):
                round_rates = {
                    "raw get": await run_pool(ids, args.concurrency, raw_read),
                    "BookKeeperLedgers.read": await run_pool(ids, args.concurrency, ledgers.read),
                    "raw multiRead": await batched(raw_multi),
                    "get_many": await batched(get_many),
                }
                for name, rate in round_rates.items():
                    rates.setdefault(name, []).append(rate)
                line = ", ".join(f"{name} {rate:,.0f}/s" for name, rate in round_rates.items())
                print(f"round {index + 1}: {line}")
            return rates
    finally:
        await raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="ledger znodes to write and read")
    parser.add_argument("--concurrency", type=int, default=128, help="single reads in flight")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per client")
    parser.add_argument("--batch", type=int, default=256, help="paths per batched read")
    parser.add_argument("--batches-in-flight", type=int, default=4, help="batched reads in flight")
    parser.add_argument("--batch-passes", type=int, default=10, help="batched reads of all N")
    args = parse(parser, {"n": 200, "concurrency": 16, "rounds": 1, "batch": 50, "batch_passes": 1})
    with ZooKeeperServer() as server:
        rates = asyncio.run(asyncio.wait_for(measure(server.address, args), BENCH_TIMEOUT_S))
    print(
        f"ledgers={args.n} concurrency={args.concurrency} rounds={args.rounds} "
        f"batch={args.batch} batches_in_flight={args.batches_in_flight}"
    )
    for name, values in rates.items():
        print(f"{name:24s} best {max(values):8,.0f}  median {median(values):8,.0f} reads/s")
    for name, base in (
        ("BookKeeperLedgers.read", "raw get"),
        ("get_many", "raw multiRead"),
        ("get_many", "raw get"),
    ):
        print(f"{name} / {base}: {ratio(rates, name, base):.0%} (median of rounds)")


if __name__ == "__main__":
    run(main)
