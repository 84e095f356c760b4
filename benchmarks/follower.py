"""Follower lag, CPU and memory against a real ZooKeeper and the devstack broker.

    .venv/bin/python -m benchmarks.follower [--owners 2000] [--rates 1000,5000]
        [--seconds 5] [--index-mls 100000] [--smoke]

Prints, from one run on one machine:
- per target rate of owner changes (broker-style trims: each write drops the oldest ledger
  of one ML and lists a new one, so each change unlinks one ledger), written by a separate
  process per 1,000/s for `--seconds`: the rate achieved, the follow lag p50/p99 as the
  follower measures it (the znode's mtime, ZooKeeper's clock → the system topic's receipt
  of the PDLI, same host), the follower process's CPU (all threads, the Pulsar client's
  included) in cores per 1,000 changes/s;
- the raw cost, in the same run, of reading the same number of changed znodes with aiozk's
  own `get_data` (one request per znode, 64 in flight): CPU per 1,000 reads/s, and the
  follower's ratio to it;
- the index's memory: an index of `--index-mls` MLs with 10 ledgers each (a fifth of the
  MLs with offloaded ledgers) and one cursor each, measured (tracemalloc and RSS), then
  extrapolated linearly to 1M MLs / 10M ledgers; and its checkpoint's compressed size.

With `--metadata oxia` the MLs are on a devstack Oxia server (`--shards`, a child process:
`benchmarks/_oxia.py`) and the follower watches them through the Oxia adapter; the writers
write through the adapter too (one trim a write: Oxia has no multi). The yardstick is then
the raw `oxia` client's notification stream, with a get of each modified key (an Oxia
notification carries no value; a follower needs it), during as many writes at the highest
rate: CPU per change of this process, the follower's ratio to it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import resource
import signal
import sys
import threading
import time
import tracemalloc
from array import array
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import aiozk
from oxia.defs import NotificationType

from benchmarks._oxia import oxia_server, raw_client
from benchmarks._truth import UndoneWork, parse, require, require_count
from benchmarks._truth import run as run_checked
from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.core.config import PulsarConfig
from services.marker.follower.checkpoint import compress
from services.marker.follower.follower import Follower, FollowerSettings
from services.marker.follower.index import OFFLOAD_RECORD, OwnerIndex
from services.marker.follower.metrics import FollowerMetrics
from services.metadata import (
    LedgerInfo,
    ManagedLedgerInfo,
    decode_managed_ledger_info,
    encode_managed_ledger_info,
)
from services.metadata.oxia import OxiaMetadataStore
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic import (
    PROP_LEDGER_ID,
    IntentPublisher,
    OutgoingMessage,
    ProducerSettings,
    SendResult,
    open_intent_publisher,
)
from services.systopic.setup import SetupPlan, prepare_topics

SYSTEM_TOPIC = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 4
LISTED = 10
SPAN = 10_000_000  # ledger ids of ML i start at i * SPAN


def connect(kind: str, address: str) -> contextlib.AbstractAsyncContextManager[MetadataStore]:
    """A session to the run's metadata store: `kind` is --metadata's value."""
    if kind == "oxia":
        return OxiaMetadataStore.connect(address, session_timeout=30.0, request_timeout=30.0)
    return ZkMetadataStore.connect(address)


def ml_path(index: int) -> str:
    return f"/managed-ledgers/public/default/persistent/bench-{index}"


def ml_data(first: int, count: int) -> bytes:
    info = ManagedLedgerInfo()
    for ledger_id in range(first, first + count):
        info.ledgerInfo.append(LedgerInfo(ledgerId=ledger_id, entries=1, size=1, timestamp=1))
    return encode_managed_ledger_info(info)


async def populate(kind: str, address: str, owners: int) -> None:
    async with connect(kind, address) as store:
        slots = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with slots:
                await store.create(ml_path(i), ml_data(i * SPAN, LISTED), make_parents=True)

        await asyncio.gather(*(one(i) for i in range(owners)))


# --- the writer (a separate process) -----------------------------------------------------


async def write_batched(
    address: str, mine: range, rate: float, seconds: float, out: Path, batch: int
) -> None:
    """As `write_load`, but `batch` trims at a time in one ZooKeeper multi: a writer then
    costs a request per `batch` changes, so the writers' CPU does not cap the rate (each
    setData still fires its own watch event and is its own change for the follower)."""
    written: list[tuple[int, float]] = []
    async with ZkMetadataStore.connect(address) as store:
        client = store._client  # the multi is not part of the store's port
        versions = [(await store.get(ml_path(i))).version for i in mine]
        firsts = [i * SPAN + v for i, v in zip(mine, versions, strict=True)]
        start = time.monotonic()
        total = int(rate * seconds) // batch
        tasks: set[asyncio.Task[None]] = set()
        cursor = 0

        async def commit(picked: list[int]) -> None:
            txn = client.begin_transaction()
            for k in picked:
                txn.set_data(ml_path(mine[k]), ml_data(firsts[k] + 1, LISTED), versions[k])
            await txn.commit()
            now = time.time()
            for k in picked:
                written.append((firsts[k], now))
                firsts[k] += 1
                versions[k] += 1

        for n in range(total):
            delay = start + n * batch / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(tasks) >= 2:  # one multi in flight per ML at most (batch ≤ owners / 2)
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            picked = [(cursor + k) % len(mine) for k in range(batch)]
            cursor = (cursor + batch) % len(mine)
            task = asyncio.create_task(commit(picked))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - start
    await asyncio.to_thread(out.write_text, json.dumps({"elapsed": elapsed, "written": written}))


async def write_load(
    kind: str, address: str, mine: range, rate: float, seconds: float, out: Path
) -> None:
    """Trim the MLs of `mine` round robin at `rate` writes/s; record the unlinked ledgers."""
    owners = len(mine)
    firsts = dict.fromkeys(range(owners), 0)
    versions = dict.fromkeys(range(owners), 0)
    written: list[tuple[int, float]] = []

    def path(i: int) -> str:
        return ml_path(mine[i])

    async with connect(kind, address) as store:
        for i in range(owners):  # where earlier phases left each ML
            current = await store.get(path(i))
            versions[i] = current.version
            # The ML's oldest listed ledger, read: Oxia's versions are not a count of writes.
            info = decode_managed_ledger_info(current.data, path=path(i))
            firsts[i] = info.ledgerInfo[0].ledgerId
        busy = dict.fromkeys(range(owners), False)
        start = time.monotonic()
        total = int(rate * seconds)
        tasks: set[asyncio.Task[None]] = set()

        async def trim(i: int) -> None:
            first = firsts[i]
            versions[i] = await store.set(path(i), ml_data(first + 1, LISTED), version=versions[i])
            written.append((first, time.time()))
            firsts[i] = first + 1
            busy[i] = False

        n = 0
        for k in range(total):
            due = start + k / rate
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(tasks) >= max(1, owners // 2):  # the server is behind: wait for it
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            while busy[n % owners]:  # fewer than half are busy: this ends
                n += 1
            busy[n % owners] = True  # one write in flight per ML: versions stay known
            task = asyncio.create_task(trim(n % owners))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            n += 1
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - start
    await asyncio.to_thread(out.write_text, json.dumps({"elapsed": elapsed, "written": written}))


# --- the follower side -------------------------------------------------------------------


class TimedPublisher:
    """The follower's publisher, noting when each ledger's PDLI was accepted."""

    def __init__(self, inner: IntentPublisher) -> None:
        self._inner = inner
        self.accepted: dict[int, float] = {}

    @property
    def producer_name(self) -> str:
        return self._inner.producer_name

    async def close(self) -> None:
        await self._inner.close()

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        results = await self._inner.publish(messages)
        now = time.time()
        for message, result in zip(messages, results, strict=True):
            if result.ok:
                self.accepted[int(message.properties[PROP_LEDGER_ID])] = now
        return results


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class LagSamples(FollowerMetrics):
    """The follower's metrics, with each lag it measures (znode mtime → PDLI accepted) kept."""

    def __init__(self) -> None:
        super().__init__()
        self.samples: list[float] = []
        self.lag = self  # type: ignore[assignment]

    def observe(self, seconds: float) -> None:
        self.samples.append(seconds)


WRITER_RATE = 1000
"""Writes per second one writer process is asked for (more rate: more processes)."""


async def run_writers(
    address: str, args: argparse.Namespace, rate: int
) -> tuple[int, dict[int, float], float]:
    """Writer processes changing the MLs at `rate` for `--seconds`: how many writers, the
    ledger each change unlinked with when it was written, and the longest writer's time."""
    writers = max(1, -(-rate // (WRITER_RATE * args.write_batch)))
    share = args.owners // writers
    outs = [Path(f"/tmp/follower-bench-{os.getpid()}-{rate}-{k}.json") for k in range(writers)]
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.follower",
            "--writer",
            args.metadata,
            address,
            str(k * share),
            str((k + 1) * share),
            str(rate / writers),
            str(args.seconds),
            str(out),
            str(args.write_batch),
        )
        for k, out in enumerate(outs)
    ]
    for process in processes:
        if await process.wait() != 0:
            raise UndoneWork(f"a writer failed (exit {process.returncode})")
    written: dict[int, float] = {}
    elapsed = 0.0
    for out in outs:
        report = json.loads(await asyncio.to_thread(out.read_text))
        await asyncio.to_thread(out.unlink)
        written.update(dict(report["written"]))
        elapsed = max(elapsed, report["elapsed"])
    return writers, written, elapsed


async def phase(
    address: str,
    timed: TimedPublisher,
    lags: LagSamples,
    args: argparse.Namespace,
    rate: int,
) -> dict[str, float]:
    lags.samples.clear()
    cpu_before, wall_before = cpu(), time.monotonic()
    writers, written, elapsed = await run_writers(address, args, rate)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(i in timed.accepted for i in written):  # noqa: ASYNC110 - polls another task's dict
        await asyncio.sleep(0.05)
    spent = cpu() - cpu_before
    wall = time.monotonic() - wall_before
    seen = sum(1 for i in written if i in timed.accepted)
    # A change the follower never published is a lag it did not measure: the figures would
    # describe the changes it kept up with, not the rate asked.
    require(written, f"the writers changed no ML at {rate}/s")
    require_count(f"changes followed within 60 s at {rate}/s", seen, len(written))
    achieved = len(written) / elapsed
    samples = lags.samples
    return {
        "target": rate,
        "writers": writers,
        "achieved": achieved,
        "changes": len(written),
        "missing": len(written) - seen,
        "p50": percentile(samples, 0.5),
        "p99": percentile(samples, 0.99),
        "cores_per_1k": spent / wall / (achieved / 1000),
        "cpu_per_change_ms": 1000 * spent / max(1, seen),
    }


async def raw_reads(address: str, owners: int, count: int) -> dict[str, float]:
    """aiozk's own get_data of `count` changed ML znodes, 64 in flight."""
    client = aiozk.ZKClient(address)
    await client.start()
    try:
        slots = asyncio.Semaphore(64)

        async def one(k: int) -> None:
            async with slots:
                await client.get_data(ml_path(k % owners))

        cpu_before, start = cpu(), time.monotonic()
        await asyncio.gather(*(one(k) for k in range(count)))
        spent, wall = cpu() - cpu_before, time.monotonic() - start
    finally:
        await client.close()
    return {"rate": count / wall, "cpu_per_read_ms": 1000 * spent / count}


async def raw_notifications(address: str, args: argparse.Namespace, rate: int) -> dict[str, float]:
    """The raw oxia client's notification stream, and a get of each modified ML key, while
    writers change the MLs at `rate`: CPU of this process per change."""
    with raw_client(address) as raw:
        notifications = raw.get_notifications()
        seen = 0
        wanted = threading.Event()  # set once the writers' count is known and reached
        target = [0]

        def follow() -> None:
            nonlocal seen
            for notification in notifications:
                if notification.notification_type() is not NotificationType.KEY_MODIFIED:
                    continue
                key = notification.key()
                if key.startswith("/managed-ledgers/"):
                    _key, value, _version = raw.get(key)
                    seen += bool(value)
                    if target[0] and seen >= target[0]:
                        wanted.set()
                        return

        thread = threading.Thread(target=follow, name="raw-notifications", daemon=True)
        thread.start()
        await asyncio.sleep(1.0)  # the per-shard streams open before the first write
        cpu_before, start = cpu(), time.monotonic()
        _writers, written, _elapsed = await run_writers(address, args, rate)
        target[0] = len(written)
        if seen >= target[0]:
            wanted.set()
        await asyncio.to_thread(wanted.wait, 60)
        spent, wall = cpu() - cpu_before, time.monotonic() - start
        await asyncio.to_thread(notifications.close)
    require_count(
        "raw notifications of the changes, with a get", min(seen, len(written)), len(written)
    )
    return {"rate": len(written) / wall, "cpu_per_read_ms": 1000 * spent / len(written)}


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def build_index(mls: int) -> OwnerIndex:
    """An index shaped like a cluster's: every ML lists LISTED ledgers, a fifth of them with
    4 offloaded, and has one cursor."""
    index = OwnerIndex()
    driver = index.drivers.number(("aws-s3", (("bucket", "offload"), ("region", "us-east-1"))))
    for i in range(mls):
        path = f"/managed-ledgers/tenant-{i % 50}/ns-{i % 997}/persistent/topic-{i}"
        first = 1_000_000 + i * 40
        offloaded = 4 if i % 5 == 0 else 0
        seen = 1_700_000_000_000 + i * 997  # the version's mtime, ms: distinct per owner
        entry = array("q", (0, 17 + i % 100, 4_294_967_296 + i, seen, LISTED, offloaded))
        entry.extend(range(first, first + LISTED))
        for position in range(offloaded):
            entry.extend((position, 3, -(i + 1), i + 7, driver, 1_700_000_000_000))
        index.put(path, entry)
        cursor = (1, 3, 4_294_967_296 + i, seen + 13, first + 99)
        index.put(f"{path}/sub-{i % 3}", array("q", cursor))
    return index


def index_memory(mls: int) -> dict[str, float]:
    """Measured, not estimated: the process's RSS growth while building the index (no
    tracing: tracemalloc's own records would be counted), then the bytes the index holds
    (a second build, traced)."""
    assert OFFLOAD_RECORD == 6
    gc.collect()
    rss_before = rss_bytes()
    index = build_index(mls)
    gc.collect()
    rss = rss_bytes() - rss_before
    refs, owners = index.ledger_count(), len(index)
    started = time.perf_counter()
    blob = compress(index)
    compress_s = time.perf_counter() - started
    del index
    gc.collect()
    tracemalloc.start()
    traced_index = build_index(mls)
    traced, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del traced_index
    return {
        "mls": mls,
        "owners": owners,
        "references": refs,
        "traced": traced,
        "rss": rss,
        "checkpoint": len(blob),
        "compress_s": compress_s,
    }


async def run(args: argparse.Namespace) -> None:
    rates = [int(r) for r in args.rates.split(",")]
    oxia = args.metadata == "oxia"
    with contextlib.ExitStack() as servers, PulsarBrokerProcess() as broker:
        address = (
            servers.enter_context(oxia_server(args.shards))
            if oxia
            else servers.enter_context(ZooKeeperServer()).address
        )
        prepare_topics(SetupPlan.for_topic(broker.admin_url, SYSTEM_TOPIC, PARTITIONS))
        await populate(args.metadata, address, args.owners)
        config = PulsarConfig(service_url=broker.service_url, topic=SYSTEM_TOPIC, partitions=4)
        async with (
            connect(args.metadata, address) as store,
            open_intent_publisher(config, ProducerSettings(producer_name="bench")) as inner,
        ):
            timed = TimedPublisher(inner)
            lags = LagSamples()
            follower = Follower(
                store=store,
                publisher=timed,
                settings=FollowerSettings(marker_id="bench", delivery_delay=timedelta(0)),
                metrics=lags,
            )
            stop = asyncio.Event()
            task = asyncio.create_task(follower.run(stop))
            while not follower.active:  # noqa: ASYNC110 - no event for leadership
                await asyncio.sleep(0.05)
            await follower.idle.wait()
            try:
                phases = [await phase(address, timed, lags, args, rate) for rate in rates]
            finally:
                # Stopped before its store closes, even when a phase failed.
                stop.set()
                await asyncio.wait_for(task, 60)
        if oxia:
            raw = await raw_notifications(address, args, max(rates))
        else:
            raw = await raw_reads(address, args.owners, int(max(p["changes"] for p in phases)))
    memory = index_memory(args.index_mls)
    report(args, phases, raw, memory)


def report(
    args: argparse.Namespace,
    phases: list[dict[str, float]],
    raw: dict[str, float],
    memory: dict[str, float],
) -> None:
    store = f"Oxia ({args.shards} shards)" if args.metadata == "oxia" else "ZooKeeper"
    shared = f"{store}, the broker, the writer and the follower"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    if args.metadata == "oxia":
        # The ratio first: absolute figures are those of the devstack server (Python).
        top = phases[-1]
        print(
            f"follower / raw oxia notifications + get (CPU per change): "
            f"{raw['cpu_per_read_ms'] / top['cpu_per_change_ms']:.0%} at {top['target']:.0f}/s; "
            f"follower {top['cpu_per_change_ms']:.3f} ms, raw {raw['cpu_per_read_ms']:.3f} ms "
            f"CPU per change; load average {load}"
        )
    print(f"machine: {os.cpu_count()} cores shared by {shared}")
    print(f"load average at the end: {load}")
    print(f"owners: {args.owners} MLs of {LISTED} ledgers; {args.seconds:g} s per rate")
    raw_short = "notification + get" if args.metadata == "oxia" else "aiozk read"
    print(
        "| target changes/s | writers | achieved | lag p50 | lag p99 "
        f"| follower cores per 1k changes/s | CPU per change | ratio to raw {raw_short} |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for p in phases:
        ratio = p["cpu_per_change_ms"] / raw["cpu_per_read_ms"]
        print(
            f"| {p['target']:.0f} | {p['writers']:.0f} | {p['achieved']:.0f} "
            f"| {1000 * p['p50']:.0f} ms "
            f"| {1000 * p['p99']:.0f} ms | {p['cores_per_1k']:.2f} "
            f"| {p['cpu_per_change_ms']:.3f} ms "
            f"| {ratio:.1f}x |" + (f" ({p['missing']:.0f} not seen)" if p["missing"] else "")
        )
    raw_name = (
        "raw oxia notifications + get of each changed key"
        if args.metadata == "oxia"
        else "raw aiozk get_data of the changed znodes"
    )
    print(f"{raw_name}: {raw['rate']:.0f}/s, {raw['cpu_per_read_ms']:.3f} ms CPU per change")
    print_memory(memory)


def print_memory(memory: dict[str, float]) -> None:
    scale = 1_000_000 / memory["mls"]
    per_10m = {
        key: memory[key] / memory["references"] * 10_000_000 / 2**20 for key in ("traced", "rss")
    }
    print(
        f"index of {memory['mls']:.0f} MLs + {memory['mls']:.0f} cursors, "
        f"{memory['references']:.0f} references: traced {memory['traced'] / 2**20:.1f} MB, "
        f"RSS +{memory['rss'] / 2**20:.1f} MB, checkpoint {memory['checkpoint'] / 2**20:.1f} MB"
    )
    mb = {key: memory[key] * scale / 2**20 for key in ("traced", "rss", "checkpoint")}
    print(
        f"extrapolated (linear, x{scale:.0f}) to 1M MLs / "
        f"{memory['references'] * scale / 1e6:.0f}M references: traced {mb['traced']:.0f} MB, "
        f"RSS {mb['rss']:.0f} MB, checkpoint {mb['checkpoint']:.0f} MB"
    )
    print(
        f"per 10M references: traced {per_10m['traced']:.0f} MB, RSS {per_10m['rss']:.0f} MB "
        f"(target 200 MB); checkpoint written in {memory['compress_s']:.1f} s"
    )


def main() -> None:
    # A TERM (a timeout) unwinds like an error, so the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        kind, address, low, high, rate, seconds, out, batch = sys.argv[2:10]
        mine = range(int(low), int(high))
        if int(batch) > 1:
            asyncio.run(
                write_batched(address, mine, float(rate), float(seconds), Path(out), int(batch))
            )
        else:
            asyncio.run(write_load(kind, address, mine, float(rate), float(seconds), Path(out)))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--owners", type=int, default=2000, help="MLs changed round robin")
    parser.add_argument("--rates", default="1000,5000", help="owner changes per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per rate")
    parser.add_argument("--index-mls", type=int, default=100_000, help="MLs in the memory test")
    parser.add_argument(
        "--write-batch",
        type=int,
        default=1,
        help="trims per ZooKeeper multi in the writers (>1: fewer writer processes and "
        "requests for the same changes/s)",
    )
    parser.add_argument(
        "--metadata",
        choices=("zookeeper", "oxia"),
        default="zookeeper",
        help="where the MLs are (oxia: the raw client's notifications are the yardstick)",
    )
    parser.add_argument("--shards", type=int, default=3, help="Oxia shards (--metadata oxia)")
    parser.add_argument(
        "--memory-only", action="store_true", help="only the index memory test (no servers)"
    )
    args = parse(parser, {"owners": 50, "rates": "50", "seconds": 1.0, "index_mls": 1000})
    if args.metadata == "oxia" and args.write_batch > 1:
        parser.error("--write-batch uses ZooKeeper's multi: not with --metadata oxia")
    if args.memory_only:
        print_memory(index_memory(args.index_mls))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    run_checked(main)
