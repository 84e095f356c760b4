"""Deleter throughput end to end, beside the raw clients in the same run; peak RSS under a
large backlog.

    .venv/bin/python -m benchmarks.deleter [--ledgers 5000] [--offloaded 1000] [--backlog 1000000]
        [--rounds 3] [--smoke]
    .venv/bin/python -m benchmarks.deleter --adaptive [--ledgers 3000] [--levels 1,4,16,64]

Starts its own ZooKeeper, S3 (moto) and devstack broker, a verifier and deleters as child
processes (as deployed). Figures:
- BookKeeper: closed Pulsar ledgers that no ML lists, one PDLI each on the system topic;
  acknowledged per second by one deleter (verify batch, conditional znode delete, parents,
  ack), beside raw aiozk get + delete of as many other ledger znodes (concurrency 64).
- Offload (`_deleter_offload.py`): offloaded ledgers (two objects each, written as Pulsar
  4.0.4 writes them) with an OFFLOAD_LEDGER PDLI each, in `--rounds` interleaved rounds: raw
  aiobotocore DeleteObjects of as many keys in 1,000-key requests, then unsigned PDLIs, then
  PDLIs signed by a marker key the verifier trusts (each signature checked before the
  decision); the CPU of the moto server and the verifier during the end-to-end runs.
- Memory: the peak RSS (VmHWM) of a deleter consuming a backlog of `--backlog` PDLIs.

With `--metadata oxia`, only the BookKeeper figure, on a devstack Oxia server (`--shards`, a
child process: `benchmarks/_oxia.py`) that the verifier and the deleter reach through
TOMBSTONE_METADATA_STORE_URL, beside the raw `oxia` client's get + conditional delete
(`expected_version_id`) of as many other ledger keys from as many plain threads as the
adapter has (16), in `--rounds` rounds that alternate the two sides (`_deleter_oxia.py`).
Offload and memory do not touch the metadata store and are not run.

With `--adaptive`, only the ZooKeeper concurrency comparison (`_deleter_adaptive.py`): static
limits swept, the adaptive limit beside them, ZooKeeper write latency seen by a probe client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiozk

from benchmarks._deleter_adaptive import report as report_adaptive
from benchmarks._deleter_adaptive import sweep
from benchmarks._deleter_budget import budget_line
from benchmarks._deleter_offload import offload_rounds, report_offload
from benchmarks._deleter_oxia import oxia_rounds
from benchmarks._deleter_oxia import report as report_oxia
from benchmarks._deleter_raw import (
    MULTI_BATCH,
    MULTI_IN_FLIGHT,
    Latency,
    probing,
    raw_multi_delete,
)
from benchmarks._deleter_stack import (
    CONCURRENCY,
    Metadata,
    OxiaMetadata,
    bounded,
    connect,
    create_topics,
    deleter_child,
    encode,
    metric,
    pdli,
    publish,
    rate_until,
    start_verifier,
    write_ledgers,
)
from benchmarks._oxia import oxia_server
from benchmarks._proc import cpu_seconds
from benchmarks._truth import UndoneWork, parse, run
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.metadata import LedgerPaths


async def raw_zookeeper(zk: ZooKeeperServer, ids: range) -> float:
    """Raw aiozk: read each ledger znode (data + version), delete it at that version."""
    paths = LedgerPaths()
    client = aiozk.ZKClient(zk.address)
    await client.start()
    try:

        async def get_and_delete(ledger_id: int) -> None:
            path = paths.ledger_path(ledger_id)
            # aiozk's high-level delete uses the version its get() cached: a CAS delete.
            await client.get(path)
            await client.delete(path)

        started = time.perf_counter()
        await bounded(ids, get_and_delete, CONCURRENCY)
        return len(ids) / (time.perf_counter() - started)
    finally:
        await client.close()


@dataclass
class Parts:
    zk: Metadata
    s3: S3Server
    broker: PulsarBrokerProcess
    verifier: str
    workdir: Path
    profile: Path | None = None
    """Where the deleter writes its cProfile stats (`--profile`), else not profiled."""
    verifier_pid: int | None = None
    cpu: dict[tuple[str, str], float] = field(default_factory=dict)
    """CPU seconds the deleter and the verifier spent during each deleter run, by run name."""


async def run_deleter(p: Parts, name: str, target: int) -> float:
    child, port = deleter_child(
        p.zk, p.s3, p.broker, p.verifier, p.workdir / f"{name}.log", profile=p.profile
    )
    await child.start()
    try:
        deleter_cpu, verifier_cpu = cpu_seconds(child.pid), cpu_seconds(p.verifier_pid)
        rate = await rate_until(port, target, timeout=600)
        p.cpu[name, "deleter"] = cpu_seconds(child.pid) - deleter_cpu
        p.cpu[name, "verifier"] = cpu_seconds(p.verifier_pid) - verifier_cpu
        dead = await asyncio.to_thread(metric, port, "tombstone_deleter_dead_lettered_total")
        # The rate counts acknowledgements; they must all be deletions, not skips or dead
        # letters, or the figure is the rate of something else.
        deleted = await asyncio.to_thread(metric, port, "tombstone_deleter_deleted_total")
        if dead or deleted < target:
            raise UndoneWork(
                f"the {name} run deleted {deleted:.0f} of {target} and dead-lettered "
                f"{dead:.0f} (see {child.log})"
            )
        return rate
    finally:
        await child.stop()


@dataclass(frozen=True)
class BookKeeperFigures:
    e2e: float
    """Ledgers per second settled by the deleter."""
    raw: float
    """Raw get + delete, ledgers per second."""
    multi: float = float("nan")
    """Raw multi delete (ZooKeeper only): the mean of the runs before and after the deleter's."""
    e2e_probe: Latency | None = None
    """The probe's write latency during the deleter's run (ZooKeeper only)."""
    multi_probe: Latency | None = None
    """The same during the raw multi deletes."""


async def bookkeeper(p: Parts, n: int) -> BookKeeperFigures:
    """The deleter's run between two raw multi-delete runs of n/2 ledgers each (interleaved,
    so that a change in the machine's load shows in both), raw get + delete before them."""
    assert isinstance(p.zk, ZooKeeperServer)  # Oxia: `oxia_rounds`
    print(f"writing {3 * n} ledger znodes...")
    await write_ledgers(p.zk, range(1, 3 * n + 1))
    others = range(n + 1, 2 * n + 1)
    raw = await raw_zookeeper(p.zk, others)
    await publish(p.broker, encode(pdli(i) for i in range(1, n + 1)))
    multi_ids = range(2 * n + 1, 3 * n + 1)
    half = len(multi_ids) // 2
    before, multi_probe = await raw_multi_delete(p.zk.address, multi_ids[:half])
    async with probing(p.zk.address) as latencies:
        e2e = await run_deleter(p, "bookkeeper", n)
    after, _ = await raw_multi_delete(p.zk.address, multi_ids[half:])
    left = await ledgers_left(p.zk, range(1, n + 1))
    if left:
        raise UndoneWork(f"{left} of the {n} ledger znodes the deleter had are still there")
    return BookKeeperFigures(e2e, raw, (before + after) / 2, Latency.of(latencies), multi_probe)


async def ledgers_left(zk: Metadata, ids: range) -> int:
    """How many of these ledger znodes still exist."""
    paths = LedgerPaths()
    async with connect(zk) as store:
        found = 0

        async def check(ledger_id: int) -> None:
            nonlocal found
            found += await store.exists(paths.ledger_path(ledger_id)) is not None

        await bounded(ids, check, CONCURRENCY)
        return found


async def memory(p: Parts, backlog: int, seconds: float) -> tuple[float, float]:
    print(f"publishing a backlog of {backlog} PDLIs...")
    base = 50_000_000
    for start in range(0, backlog, 100_000):
        stop = min(backlog, start + 100_000)
        await publish(p.broker, encode(pdli(base + i) for i in range(start, stop)))
    child, port = deleter_child(p.zk, p.s3, p.broker, p.verifier, p.workdir / "memory.log")
    await child.start()
    try:
        peak = 0.0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            peak = max(peak, child.peak_rss_mb())
            await asyncio.sleep(0.5)
        acked = await asyncio.to_thread(metric, port, "tombstone_deleter_acknowledged_total")
        return max(peak, child.peak_rss_mb()), acked
    finally:
        await child.stop()


async def main(args: argparse.Namespace) -> None:
    oxia = args.metadata == "oxia"
    with (
        tempfile.TemporaryDirectory() as tmp,
        contextlib.ExitStack() as servers,
        S3Server() as s3,
        PulsarBrokerProcess() as broker,
    ):
        zk: Metadata = (
            OxiaMetadata(servers.enter_context(oxia_server(args.shards)))
            if oxia
            else servers.enter_context(ZooKeeperServer())
        )
        workdir = Path(tmp)
        create_topics(broker)
        await write_ledgers(zk, range(0))  # the ledgers root: the verifier checks it at start
        verifier_child, verifier = await start_verifier(zk, s3, workdir, profile=args.profile)
        parts = Parts(zk, s3, broker, verifier, workdir, args.profile, verifier_child.pid)
        if args.adaptive:
            assert isinstance(zk, ZooKeeperServer)  # refused with --metadata oxia
            try:
                levels = [int(level) for level in args.levels.split(",")]
                runs = await sweep((zk, s3, broker, verifier), args.ledgers, levels, tmp)
            finally:
                await verifier_child.stop()
            report_adaptive(runs, args.ledgers)
            return
        try:
            if oxia:
                assert verifier_child.pid is not None
                rounds = await oxia_rounds(parts, args.ledgers, args.rounds, verifier_child.pid)
                report_oxia(rounds, args.ledgers, args.shards)
                return
            bk = await bookkeeper(parts, args.ledgers)
            nan = float("nan")
            off = await offload_rounds(
                s3,
                broker,
                verifier_child.pid,
                lambda name, target: run_deleter(parts, name, target),
                args.offloaded,
                args.rounds if args.offloaded else 0,
            )
            mem = await memory(parts, args.backlog, args.seconds) if args.backlog else (nan, nan)
        finally:
            await verifier_child.stop()
    report(args, bk, mem)
    report_offload(off, args.offloaded)
    for (run_of, process), seconds in parts.cpu.items():
        per = f" ({seconds / args.ledgers * 1e6:.0f} µs a ledger)" if run_of == "bookkeeper" else ""
        print(f"CPU of the {process} during the {run_of} run: {seconds:.2f} s{per}")
    spent = sum(s for (run_of, _), s in parts.cpu.items() if run_of == "bookkeeper")
    # Last: it times the audit line by reconfiguring this process's logging.
    print(budget_line(bk.multi, spent / args.ledgers * 1e6))


def report(args: argparse.Namespace, bk: BookKeeperFigures, mem: tuple[float, float]) -> None:
    print()
    print("| | deleter (end to end) | raw client | ratio |")
    print("| --- | --- | --- | --- |")
    print(
        f"| BookKeeper ledgers/s | {bk.e2e:.0f} | {bk.raw:.0f} (aiozk get + delete) "
        f"| {bk.e2e / bk.raw:.2f} |"
    )
    print(
        f"| BookKeeper ledgers/s | {bk.e2e:.0f} | {bk.multi:.0f} (raw multi delete, "
        f"{MULTI_BATCH} a multi, {MULTI_IN_FLIGHT} in flight) | {bk.e2e / bk.multi:.2f} |"
    )
    print(
        f"peak RSS with a backlog of {args.backlog} PDLIs: {mem[0]:.0f} MB "
        f"({mem[1]:.0f} settled in {args.seconds:.0f} s)"
    )
    print(f"ZooKeeper write probe during the deleter's run: {bk.e2e_probe}")
    print(f"ZooKeeper write probe during the raw multi deletes: {bk.multi_probe}")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ledgers", type=int, default=5000)
    parser.add_argument("--offloaded", type=int, default=1000)
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved rounds: offload (raw, unsigned, signed); on Oxia, raw and deleter",
    )
    parser.add_argument("--seconds", type=float, default=60.0, help="memory run length")
    parser.add_argument(
        "--adaptive",
        action="store_true",
        help="only the adaptive ZooKeeper limit against a sweep of static ones",
    )
    parser.add_argument(
        "--metadata",
        choices=("zookeeper", "oxia"),
        default="zookeeper",
        help="where the ledger metadata is (oxia: the BookKeeper figure only)",
    )
    parser.add_argument("--shards", type=int, default=3, help="Oxia shards (--metadata oxia)")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="a directory: the verifier and the deleters run under cProfile, stats written there",
    )
    parser.add_argument(
        "--levels", default="1,4,16,64", help="static ZooKeeper limits swept (--adaptive)"
    )
    smoke = {"ledgers": 20, "offloaded": 10, "backlog": 200, "seconds": 2.0, "rounds": 1}
    args = parse(parser, smoke)
    if args.adaptive and args.metadata == "oxia":
        parser.error("--adaptive compares ZooKeeper concurrency limits: not with --metadata oxia")
    run(lambda: asyncio.run(main(args)))
