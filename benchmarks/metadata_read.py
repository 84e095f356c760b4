"""Ledger-metadata read rate: `BookKeeperLedgers.read` (decode included) vs raw aiozk.

    .venv/bin/python -m benchmarks.metadata_read [--n 20000] [--concurrency 128] [--rounds 5]

Starts its own ZooKeeper, writes N ledger znodes (v3 format, Pulsar-like custom metadata,
ids on both sides of 2^31), then reads them all with the same bounded worker pool through
each client, alternating rounds. Prints both rates and the median per-round ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from statistics import median

import aiozk

from devstack.zookeeper import ZooKeeperServer
from services.metadata import (
    BookKeeperLedgers,
    LedgerMetadata,
    LedgerState,
    Segment,
    ZkMetadataStore,
)

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


async def run_pool(
    items: list[int], concurrency: int, work: Callable[[int], Awaitable[object]]
) -> float:
    """Run `work` over every item with `concurrency` workers; return items per second."""
    source: Iterator[int] = iter(items)

    async def worker() -> None:
        for item in source:
            await work(item)

    start = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())
    return len(items) / (time.perf_counter() - start)


async def populate(ledgers: BookKeeperLedgers, ids: list[int], concurrency: int) -> None:
    async def create(ledger_id: int) -> None:
        await ledgers.create(sample_ledger(ledger_id))

    await run_pool(ids, concurrency, create)


async def measure(
    address: str, n: int, concurrency: int, rounds: int
) -> tuple[list[float], list[float]]:
    """Per-round read rates (raw, ours); each round reads every ledger once per client."""
    ids = ledger_ids(n)
    raw = aiozk.ZKClient(address, session_timeout=30)
    await raw.start()
    try:
        async with ZkMetadataStore.connect(address, session_timeout=30.0) as store:
            ledgers = BookKeeperLedgers(store)
            await populate(ledgers, ids, concurrency)
            paths = {ledger_id: ledgers.path(ledger_id) for ledger_id in ids}

            async def raw_read(ledger_id: int) -> object:
                return await raw.get(paths[ledger_id])

            raw_rates: list[float] = []
            our_rates: list[float] = []
            for index in range(rounds):
                raw_rates.append(await run_pool(ids, concurrency, raw_read))
                our_rates.append(await run_pool(ids, concurrency, ledgers.read))
                ratio = our_rates[-1] / raw_rates[-1]
                print(
                    f"round {index + 1}: raw {raw_rates[-1]:,.0f}/s, "
                    f"ours {our_rates[-1]:,.0f}/s, ratio {ratio:.0%}"
                )
            return raw_rates, our_rates
    finally:
        await raw.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="ledger znodes to write and read")
    parser.add_argument("--concurrency", type=int, default=128, help="reads in flight")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per client")
    args = parser.parse_args()
    with ZooKeeperServer() as server:
        raw, ours = asyncio.run(
            asyncio.wait_for(
                measure(server.address, args.n, args.concurrency, args.rounds), BENCH_TIMEOUT_S
            )
        )
    # Each round measures both clients back to back, so the per-round ratio cancels most of
    # the drift of a shared machine; the median of those ratios is the headline figure.
    ratios = [o / r for o, r in zip(ours, raw, strict=True)]
    print(f"ledgers={args.n} concurrency={args.concurrency} rounds={args.rounds}")
    print(f"raw aiozk get:           best {max(raw):8,.0f}  median {median(raw):8,.0f} reads/s")
    print(f"BookKeeperLedgers.read:  best {max(ours):8,.0f}  median {median(ours):8,.0f} reads/s")
    print(f"ratio (median of rounds): {median(ratios):.0%}")


if __name__ == "__main__":
    main()
