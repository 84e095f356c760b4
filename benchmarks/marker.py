"""Marker throughput and latency against the devstack broker and a real ZooKeeper.

    .venv/bin/python -m benchmarks.marker [--owners 500] [--ledgers 100] [--concurrency 32]
        [--sign] [--smoke] [--encode [--cprofile N]]

Prints, from one run on one machine:
- the raw `pulsar-client` send rate (sync client, `send_async`, batching on) with PDLI-sized
  messages, and the same with `deliver_after` (never batched by the client);
- the system-topic publisher alone (rounds with one receipt each) and `pulsar.asyncio`;
- rounds of (raw send rate, then PDLIs recorded per second by one marker process,
  `python -m services.marker`, under `--concurrency` concurrent Mark calls over gRPC, each
  call `--ledgers` ledgers of its own topic), with the ratio of each round: the machine is
  shared, so each ratio compares runs made seconds apart;
- the same with `--big-ledgers`-ledger calls;
- p50/p99 latency of a `--ledgers`-ledger Mark, alone and under load;
- the CPU time per PDLI of the marker process in each round (every thread, from /proc), beside
  the benchmark process's CPU per message in the raw run: less sensitive to a loaded machine
  than the rates;
- with `--encode`, only the CPU per PDLI of encoding (and signing) one call's PDLIs in
  process, and of each part of signing (`benchmarks/_marker_encode.py`);
- the same CPU split by thread (`/proc/<pid>/task`; "main" is the thread that runs the event
  loop), medians over the rounds;
- with `--probe`, the marker runs under `benchmarks._marker_probe`, which names Python's own
  threads apart from the client libraries' unnamed C++ threads ("native") and counts its
  garbage collections per generation and their CPU (per PDLI in each round); with
  `--gc-ab`, every other round runs with Python's collector defaults instead of the
  marker's (`services/marker/_collector.py`), to measure what that saves;
- with `--sign`, all the marker figures again from a second marker process that signs every
  PDLI (a fresh Ed25519 key), so the report shows the ratio to raw with and without signing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pulsar
import pulsar.asyncio as pulsar_asyncio
from grpc import aio

from benchmarks._marker_encode import bench_request, run_encode, signed_messages
from benchmarks._proc import cpu_seconds, thread_cpu_seconds
from benchmarks._truth import UndoneWork, parse, require, require_count
from benchmarks._truth import run as run_checked
from devstack.pulsar import PulsarBrokerProcess
from devstack.services import ServiceProcess
from devstack.zookeeper import ZooKeeperServer
from services.core.config import PulsarConfig
from services.core.signing_keys import generate_key_pair, write_key_pair
from services.marker.owners import LedgerRef
from services.marker.planning import Stamp, build_pdli
from services.metadata import LedgerInfo, ManagedLedgerInfo, encode_managed_ledger_info
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic import ProducerSettings, encode_intent, open_intent_publisher
from services.systopic.setup import SetupPlan, prepare_topics
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

SYSTEM_TOPIC = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 4
SPAN = 1_000_000  # ledger ids of owner i start at i * SPAN
_QUIET = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)


def sample_messages(count: int, *, signed: bool = False) -> list[tuple[bytes, str, dict[str, str]]]:
    """PDLI messages exactly as the marker builds them; with `signed`, as a signing marker
    does (each about three times the bytes: the signature and its tree proof)."""
    if signed:
        return [(m.payload, m.partition_key, dict(m.properties)) for m in signed_messages(count)]
    request = bench_request()
    stamp = Stamp(fence_token=7, marked_at_ms=1, not_before_ms=5001, marker_id="m", cluster="c")
    out = []
    for i in range(count):
        msg = encode_intent(build_pdli(request, LedgerRef(1000 + i), _pd.LEDGER, stamp))
        out.append((msg.payload, msg.partition_key, dict(msg.properties)))
    return out


def raw_rate(
    url: str, topic: str, count: int, *, delayed: bool = False, signed: bool = False
) -> float:
    """The raw client: `send_async` in a loop, waiting for the last receipt (of messages the
    size of signed PDLIs with `signed`)."""
    client = pulsar.Client(url, logger=_QUIET)
    producer = client.create_producer(
        topic,
        batching_enabled=True,
        batching_max_publish_delay_ms=2,
        max_pending_messages=10_000,
        max_pending_messages_across_partitions=10_000,
        block_if_queue_full=True,
    )
    messages = sample_messages(count, signed=signed)
    done = threading.Event()
    remaining = [count]
    failed: list[object] = []
    lock = threading.Lock()

    def callback(result: object, message_id: object) -> None:
        with lock:
            if result != pulsar.Result.Ok:
                failed.append(result)
            remaining[0] -= 1
            if remaining[0] == 0:
                done.set()

    delay = timedelta(seconds=5) if delayed else None
    started = time.perf_counter()
    for payload, key, props in messages:
        producer.send_async(
            payload, callback, properties=props, partition_key=key, deliver_after=delay
        )
    finished = done.wait(300)
    elapsed = time.perf_counter() - started
    client.close()
    require(finished, f"raw send: {remaining[0]} of {count} receipts missing after 300 s")
    require(not failed, f"raw send: {len(failed)} of {count} sends failed: {failed[:1]}")
    return count / elapsed


async def publisher_rate(
    url: str, topic: str, count: int, concurrency: int, per_call: int
) -> float:
    """`services.systopic` alone: `publish` calls of `per_call` messages, `concurrency` at once."""
    from services.systopic import OutgoingMessage

    config = PulsarConfig(service_url=url, topic=topic, partitions=PARTITIONS)
    batch = [OutgoingMessage(p, k, props) for p, k, props in sample_messages(per_call)]
    async with open_intent_publisher(config, ProducerSettings(producer_name="bench-pub")) as pub:
        calls = count // per_call

        async def worker() -> None:
            nonlocal calls
            while calls > 0:
                calls -= 1
                results = await pub.publish(batch)
                require(all(r.ok for r in results), f"the publisher failed: {results}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return count / (time.perf_counter() - started)


async def asyncio_client_rate(
    url: str, topic: str, count: int, concurrency: int, per_call: int
) -> float:
    """`pulsar.asyncio`: one awaited `send` per message, gathered per call."""
    client = pulsar_asyncio.Client(url, logger=_QUIET)
    producer = await client.create_producer(
        topic,
        batching_max_publish_delay_ms=2,
        max_pending_messages=10_000,
        max_pending_messages_across_partitions=10_000,
    )
    batch = sample_messages(per_call)
    calls = count // per_call

    async def worker() -> None:
        nonlocal calls
        while calls > 0:
            calls -= 1
            await asyncio.gather(
                *(producer.send(p, properties=props, partition_key=k) for p, k, props in batch)
            )

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = count / (time.perf_counter() - started)
    await client.close()
    return rate


def ml_data(first_ledger: int, count: int) -> bytes:
    info = ManagedLedgerInfo()
    for i in range(count):
        info.ledgerInfo.append(
            LedgerInfo(ledgerId=first_ledger + i, entries=1, size=1, timestamp=1)
        )
    return encode_managed_ledger_info(info)


def ml_name(index: int) -> str:
    return f"public/default/persistent/bench-{index}"


async def populate(zookeeper: ZooKeeperServer, owners: range, ledgers: int) -> None:
    """One ML znode per owner index, listing `ledgers + 1` ledgers (one stays listed)."""
    async with ZkMetadataStore.connect(zookeeper.address) as store:
        sem = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with sem:
                path = f"/managed-ledgers/{ml_name(i)}"
                await store.create(path, ml_data(i * SPAN, ledgers + 1), make_parents=True)

        await asyncio.gather(*(one(i) for i in owners))


def mark_request(index: int, ledgers: int) -> _mk.MarkLedgersRequest:
    first = index * SPAN
    return _mk.MarkLedgersRequest(
        component=_pd.MANAGED_LEDGER,
        managed_ledger_name=ml_name(index),
        ledger_ids=range(first, first + ledgers),
    )


async def mark_load(
    stub: _mk_grpc.MarkerStub, indexes: list[int], ledgers: int, concurrency: int
) -> tuple[float, list[float]]:
    """Mark every owner in `indexes` with `concurrency` calls in flight: PDLIs/s, latencies."""
    queue = list(reversed(indexes))
    latencies: list[float] = []
    sent = 0

    async def worker() -> None:
        nonlocal sent
        while queue:
            index = queue.pop()
            started = time.perf_counter()
            response = await stub.MarkLedgers(mark_request(index, ledgers))
            latencies.append(time.perf_counter() - started)
            require_count(f"ledgers marked of {ml_name(index)}", len(response.marked), ledgers)
            sent += response.pdlis_sent

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    require_count("PDLIs the marker sent", sent, len(indexes) * ledgers)
    return sent / elapsed, latencies


def py_spy(profile: Path) -> tuple[str, ...]:
    """The command prefix that records the marker into `profile`; py-spy samples every thread
    (the client's I/O threads too) without pausing them."""
    spy = str(Path(sys.executable).with_name("py-spy"))
    options = ("--threads", "--nonblocking", "--rate", "100", "--format", "raw")
    return (spy, "record", *options, "-o", str(profile), "--")


async def start_marker(
    zookeeper: ZooKeeperServer,
    broker: PulsarBrokerProcess,
    profile: Path | None = None,
    *,
    sign: bool = False,
    probe: Path | None = None,
) -> ServiceProcess:
    """The marker as its own process, ready; its log goes to a file (a pipe nobody drains
    would block it). With `sign`, it signs every PDLI with a key made for the run; with
    `probe`, it runs under `benchmarks._marker_probe`, which writes its collector's figures
    there on SIGUSR1."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-marker-"))
    probing = {}
    if probe is not None:
        probing = {"BENCH_MARKER_PROBE_FILE": str(probe)}
    if profile is not None and sign:
        # The unsigned marker's profile keeps the name given; the signing one's sits beside it.
        profile = profile.with_name(f"{profile.stem}-signed{profile.suffix}")
    signing = {}
    if sign:
        private, _ = write_key_pair(workdir / "keys", generate_key_pair(), "bench")
        signing = {"TOMBSTONE_MARKER_SIGNING_KEYS": f"bench={private}"}
    env = {
        **signing,
        **probing,
        "TOMBSTONE_ZOOKEEPER_SERVERS": zookeeper.address,
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_MARKER_ID": "marker-bench",
        "TOMBSTONE_MARKER_JOURNAL_DIR": str(workdir),
        "TOMBSTONE_MARKER_BELIEVE_ENABLED": "false",
    }
    marker = ServiceProcess(
        "services.marker" if probe is None else "benchmarks._marker_probe",
        workdir / "marker.log",
        env=env,
        prefix=py_spy(profile) if profile is not None else (),
        # py-spy writes its file on SIGINT and passes the signal on to the marker; writing
        # takes a while after a long run, hence the long wait before SIGKILL.
        stop_signal=signal.SIGINT if profile is not None else signal.SIGTERM,
        stop_timeout=120.0,
    )
    await marker.start()
    return marker


def read_probe(probe: Path) -> dict[str, Any]:
    """The probe's last figures; an empty sequence 0 before its first write."""
    return json.loads(probe.read_text()) if probe.exists() else {"sequence": 0}


async def probe_figures(pid: int, probe: Path) -> dict[str, Any]:
    """The marker's figures so far (`benchmarks._marker_probe`): collections and their CPU
    seconds per generation, and the names of Python's threads by OS thread id."""
    last = read_probe(probe)["sequence"]
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        figures = read_probe(probe)
        if figures["sequence"] > last:
            return {
                "collections": [g["collections"] for g in figures["stats"]],
                "seconds": figures["seconds"],
                "threads": {int(tid): name for tid, name in figures["threads"].items()},
                "python_defaults": figures["python_defaults"],
            }
        await asyncio.sleep(0.01)
    raise UndoneWork(f"the marker wrote no figures to {probe} within 30 s")


def gc_delta(before: dict[str, Any], after: dict[str, Any], pdlis: int) -> dict[str, list[float]]:
    collections = [a - b for a, b in zip(after["collections"], before["collections"], strict=True)]
    seconds = [a - b for a, b in zip(after["seconds"], before["seconds"], strict=True)]
    return {"collections": collections, "us": [x / pdlis * 1e6 for x in seconds]}


def thread_label(tid: int, comm: str, pid: int, process_comm: str, python: dict[int, str]) -> str:
    """What a thread is: the event loop's ("main"), one of Python's by its name with its
    number dropped (the lanes' flush threads, executors), a library's named thread, or
    "native": the unnamed C++ threads of the clients (the Pulsar client's I/O, listener and
    timer threads)."""
    if tid == pid:
        return "main"
    if tid in python:
        name = python[tid]
        return (
            "systopic-flush" if name.startswith("systopic-flush") else re.sub(r"[-_\d]+$", "", name)
        )
    if comm != process_comm or not python:
        return comm
    return "native"


def threads_delta(
    before: dict[int, tuple[str, float]],
    after: dict[int, tuple[str, float]],
    pid: int,
    pdlis: int,
    python: dict[int, str],
) -> dict[str, float]:
    """CPU µs per PDLI of each kind of thread between two reads (threads alive at both)."""
    process_comm = after[pid][0] if pid in after else ""
    split: dict[str, float] = {}
    for tid, (comm, seconds) in after.items():
        if tid in before:
            label = thread_label(tid, comm, pid, process_comm, python)
            split[label] = split.get(label, 0.0) + (seconds - before[tid][1]) / pdlis * 1e6
    return split


def ms(seconds: float) -> str:
    return f"{seconds * 1000:6.1f} ms"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def client_figures(url: str, n: int, args: argparse.Namespace) -> dict[str, float]:
    topic = "persistent://public/default/bench-"
    return {
        "raw": await asyncio.to_thread(raw_rate, url, topic + "raw", n),
        "delayed": await asyncio.to_thread(raw_rate, url, topic + "delayed", n // 4, delayed=True),
        "publisher": await publisher_rate(url, topic + "pub", n, args.concurrency, args.ledgers),
        "asyncio": await asyncio_client_rate(url, topic + "aio", n, args.concurrency, args.ledgers),
    }


@dataclass
class Round:
    raw: float
    """Raw client msg/s measured just before the marker run of this round."""
    marker: float
    """Marker PDLIs/s in this round."""
    raw_cpu_us: float = 0.0
    """CPU µs per message of the benchmark process (the raw client's threads) in its run."""
    raw_same_bytes: float = 0.0
    """For a signing marker: the raw client's msg/s with messages of the signed PDLIs' size,
    the same bytes the marker sends (0: not measured, the PDLIs are unsigned)."""
    marker_cpu_us: float = 0.0
    """CPU µs per PDLI of the marker process (every thread) in this round; 0 when py-spy
    records it (the process is then py-spy's child)."""
    threads_us: dict[str, float] = field(default_factory=dict)
    """The same split by thread name ("main": the event loop's thread)."""
    gc: dict[str, list[float]] = field(default_factory=dict)
    """With `--probe`: "collections" per generation in the round, and "us" their CPU µs per PDLI."""

    @property
    def ratio(self) -> float:
        return self.marker / self.raw

    @property
    def ratio_same_bytes(self) -> float:
        return self.marker / self.raw_same_bytes if self.raw_same_bytes else float("nan")


@dataclass
class MarkerFigures:
    rounds: list[Round]
    """Interleaved raw and marker runs with `--ledgers`-ledger calls."""
    big: Round
    """One raw run and one marker run with `--big-ledgers`-ledger calls."""
    alone: list[float]
    """Latencies of Mark calls made one at a time."""
    loaded: list[float]
    """Latencies of the calls of the throughput runs."""
    next_owner: int
    """The first owner index this run did not use."""


async def marker_figures(
    zookeeper: ZooKeeperServer,
    broker: PulsarBrokerProcess,
    args: argparse.Namespace,
    *,
    first_owner: int = 0,
    sign: bool = False,
) -> MarkerFigures:
    """Unloaded latency, then rounds of (raw run, marker run) so that each ratio compares
    runs made seconds apart: the machine is shared and its load drifts. Owners from
    `first_owner` on are written and marked (each marker run needs its own)."""
    owners = iter(range(first_owner, 10**6))
    rounds = [[next(owners) for _ in range(args.owners)] for _ in range(args.rounds)]
    alone_owners = [next(owners) for _ in range(args.latency_calls)]
    big = [next(owners) for _ in range(args.big_owners)]
    await populate(zookeeper, range(first_owner, big[0]), args.ledgers)
    await populate(zookeeper, range(big[0], big[-1] + 1), args.big_ledgers)
    url, raw_topic = broker.service_url, "persistent://public/default/bench-raw"
    n = args.owners * args.ledgers
    probe = None
    if args.probe:
        probe = Path(tempfile.mkdtemp(prefix="bench-marker-gc-")) / "gc.json"
    marker = await start_marker(zookeeper, broker, args.profile, sign=sign, probe=probe)
    try:
        async with aio.insecure_channel(marker.address) as channel:
            stub = _mk_grpc.MarkerStub(channel)
            alone = []
            for i in alone_owners:
                started = time.perf_counter()
                await stub.MarkLedgers(mark_request(i, args.ledgers))
                alone.append(time.perf_counter() - started)
            results, loaded = [], []
            pid = None if args.profile else marker.pid  # py-spy's own pid when profiling
            for number, indexes in enumerate(rounds):
                if args.gc_ab and pid and probe and number % 2:
                    os.kill(pid, signal.SIGUSR2)  # Python's collector defaults this round
                raw_cpu = cpu_seconds(os.getpid())
                raw = await asyncio.to_thread(raw_rate, url, raw_topic, n)
                raw_cpu = cpu_seconds(os.getpid()) - raw_cpu
                same = 0.0
                if sign:
                    same = await asyncio.to_thread(raw_rate, url, raw_topic, n, signed=True)
                probed = await probe_figures(pid, probe) if pid and probe else {}
                threads_before = thread_cpu_seconds(pid)
                before = cpu_seconds(pid) if pid else 0.0
                rate, latencies = await mark_load(stub, indexes, args.ledgers, args.concurrency)
                marker_cpu = cpu_seconds(pid) - before if pid else 0.0
                threads_after = thread_cpu_seconds(pid)
                gc, python = {}, {}
                if pid and probe:
                    after = await probe_figures(pid, probe)
                    gc, python = gc_delta(probed, after, n), after["threads"]
                    gc["python_defaults"] = [float(after["python_defaults"])]
                    if after["python_defaults"]:
                        os.kill(pid, signal.SIGUSR2)  # back to the marker's own
                threads = {}
                if pid:
                    threads = threads_delta(threads_before, threads_after, pid, n, python)
                results.append(
                    Round(
                        raw,
                        rate,
                        raw_cpu_us=raw_cpu / n * 1e6,
                        marker_cpu_us=marker_cpu / n * 1e6,
                        raw_same_bytes=same,
                        threads_us=threads,
                        gc=gc,
                    )
                )
                loaded += latencies
            raw = await asyncio.to_thread(raw_rate, url, raw_topic, n)
            big_rate, _ = await mark_load(stub, big, args.big_ledgers, args.concurrency // 4)
    finally:
        await marker.stop()
    return MarkerFigures(results, Round(raw, big_rate), alone, loaded, big[-1] + 1)


async def run(args: argparse.Namespace) -> None:
    with ZooKeeperServer() as zookeeper, PulsarBrokerProcess() as broker:
        for name in ("raw", "delayed", "pub", "aio"):
            bench_topic = f"persistent://public/default/bench-{name}"
            broker.control.create_partitioned_topic(bench_topic, PARTITIONS)
            broker.control.set_retention(bench_topic)
        prepare_topics(SetupPlan.for_topic(broker.admin_url, SYSTEM_TOPIC, PARTITIONS))
        client = await client_figures(broker.service_url, args.owners * args.ledgers, args)
        runs = {"unsigned": await marker_figures(zookeeper, broker, args)}
        if args.sign:
            first = runs["unsigned"].next_owner
            runs["signed"] = await marker_figures(
                zookeeper, broker, args, first_owner=first, sign=True
            )
    print(f"machine: {os.cpu_count()} cores shared by broker, ZooKeeper, marker and load generator")
    print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    report_clients(client)
    for name, marker in runs.items():
        print(f"--- marker, PDLIs {name}")
        report(args, marker)
    if args.sign:
        ratios = {
            name: statistics.median(r.ratio for r in run.rounds) for name, run in runs.items()
        }
        report_thread_difference(runs["unsigned"].rounds, runs["signed"].rounds)
        same = statistics.median(r.ratio_same_bytes for r in runs["signed"].rounds)
        print(
            f"median ratio to raw: unsigned {ratios['unsigned']:.0%}, signed {ratios['signed']:.0%}"
            f" (signed against the raw client sending the same bytes: {same:.0%})"
        )


def report_clients(c: dict[str, float]) -> None:
    print(f"raw pulsar-client send_async, batched:        {c['raw']:7.0f} msg/s")
    print(f"raw pulsar-client, deliver_after (unbatched): {c['delayed']:7.0f} msg/s")
    print(f"systopic publisher (one receipt per round):   {c['publisher']:7.0f} msg/s")
    print(f"pulsar.asyncio, one awaited send per message: {c['asyncio']:7.0f} msg/s")


def thread_medians(rounds: list[Round]) -> dict[str, float]:
    """Per thread name, the median over the rounds of its CPU µs per PDLI, largest first
    (threads that used no CPU in any round left out)."""
    names = {name for r in rounds for name in r.threads_us}
    medians = {n: statistics.median(r.threads_us.get(n, 0.0) for r in rounds) for n in names}
    return dict(sorted(((n, m) for n, m in medians.items() if m > 0), key=lambda x: -x[1]))


def report_thread_difference(unsigned: list[Round], signed: list[Round]) -> None:
    """What a signed PDLI costs each thread of the marker more than an unsigned one."""
    a, b = thread_medians(unsigned), thread_medians(signed)
    print("CPU µs/PDLI by thread, unsigned → signed (medians of the rounds):")
    for name in sorted(set(a) | set(b), key=lambda n: -(b.get(n, 0.0) - a.get(n, 0.0))):
        before, after = a.get(name, 0.0), b.get(name, 0.0)
        print(f"  {name:16} {before:6.1f} → {after:6.1f}  ({after - before:+.1f})")
    total_a = statistics.median(r.marker_cpu_us for r in unsigned)
    total_b = statistics.median(r.marker_cpu_us for r in signed)
    print(f"  {'every thread':16} {total_a:6.1f} → {total_b:6.1f}  ({total_b - total_a:+.1f})")


def report(args: argparse.Namespace, marker: MarkerFigures) -> None:
    for i, r in enumerate(marker.rounds, 1):
        print(
            f"round {i}: raw {r.raw:7.0f} msg/s, marker ({args.concurrency} concurrent Marks of "
            f"{args.ledgers} ledgers) {r.marker:7.0f} PDLIs/s = {r.ratio:.0%} of raw; "
            f"CPU {r.marker_cpu_us:.1f} µs/PDLI (raw client {r.raw_cpu_us:.1f} µs/msg)"
            + (
                f"; raw with signed-size messages {r.raw_same_bytes:7.0f} msg/s, "
                f"{r.ratio_same_bytes:.0%}"
                if r.raw_same_bytes
                else ""
            )
        )
        if r.gc:
            setup = "Python's defaults" if r.gc["python_defaults"][0] else "the marker's"
            counts = "/".join(f"{c:.0f}" for c in r.gc["collections"])
            cpu = "/".join(f"{u:.2f}" for u in r.gc["us"])
            print(f"  collector: {setup}; collections (gen 0/1/2) {counts}, CPU {cpu} µs/PDLI")
    split = thread_medians(marker.rounds)
    if split:
        print(
            "CPU µs/PDLI by thread (median of the rounds): "
            + ", ".join(f"{name} {us:.1f}" for name, us in split.items())
        )
    if any(r.gc.get("python_defaults", [0.0])[0] for r in marker.rounds):
        for defaults, setup in ((0.0, "the marker's collector"), (1.0, "Python's defaults")):
            rounds = [r for r in marker.rounds if r.gc["python_defaults"][0] == defaults]
            print(
                f"{setup}: median ratio {statistics.median(r.ratio for r in rounds):.0%}, CPU "
                f"{statistics.median(r.marker_cpu_us for r in rounds):.1f} µs/PDLI, of which "
                f"main {statistics.median(r.threads_us.get('main', 0.0) for r in rounds):.1f}, "
                f"collector {statistics.median(sum(r.gc['us']) for r in rounds):.1f}"
            )
    ratios = [r.ratio for r in marker.rounds]
    best = max(marker.rounds, key=lambda r: r.marker)
    print(
        f"marker, {args.ledgers}-ledger calls: best {best.marker:.0f} PDLIs/s, "
        f"median ratio to raw {statistics.median(ratios):.0%}"
    )
    b = marker.big
    print(
        f"marker, {args.concurrency // 4} concurrent Marks of {args.big_ledgers} ledgers: "
        f"{b.marker:7.0f} PDLIs/s = {b.ratio:.0%} of raw ({b.raw:.0f} msg/s just before)"
    )
    alone, loaded = marker.alone, marker.loaded
    print(
        f"{args.ledgers}-ledger Mark latency alone:      p50 {ms(statistics.median(alone))}"
        f"  p99 {ms(percentile(alone, 0.99))}  ({len(alone)} calls)"
    )
    print(
        f"{args.ledgers}-ledger Mark latency under load: p50 {ms(statistics.median(loaded))}"
        f"  p99 {ms(percentile(loaded, 0.99))}  ({len(loaded)} calls)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--profile", type=Path, help="record the marker with py-spy into this folded-stacks file"
    )
    parser.add_argument("--owners", type=int, default=500, help="topics marked per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved raw/marker rounds")
    parser.add_argument("--ledgers", type=int, default=100, help="ledgers per Mark call")
    parser.add_argument("--concurrency", type=int, default=32, help="Mark calls in flight")
    parser.add_argument("--latency-calls", type=int, default=100, help="unloaded Mark calls")
    parser.add_argument("--big-owners", type=int, default=30, help="topics marked in big calls")
    parser.add_argument("--big-ledgers", type=int, default=1000, help="ledgers per big call")
    parser.add_argument(
        "--sign", action="store_true", help="also run a marker that signs every PDLI"
    )
    parser.add_argument(
        "--probe",
        action="store_true",
        help="run the marker under benchmarks._marker_probe: Python's threads named apart from "
        "the clients' C++ threads, its garbage collections and their CPU",
    )
    parser.add_argument(
        "--gc-ab",
        action="store_true",
        help="with --probe: every other round with Python's collector defaults",
    )
    parser.add_argument(
        "--encode",
        action="store_true",
        help="only the encode and sign path of one --ledgers call, in process (no broker)",
    )
    parser.add_argument("--encode-calls", type=int, default=200, help="calls per --encode round")
    parser.add_argument(
        "--cprofile", type=int, default=0, help="with --encode: print the top N functions"
    )
    args = parse(
        parser,
        {
            "owners": 8,
            "rounds": 1,
            "ledgers": 10,
            "concurrency": 4,
            "latency_calls": 4,
            "big_owners": 2,
            "big_ledgers": 50,
            "sign": True,
            "encode_calls": 5,
        },
    )
    args.probe = args.probe or args.gc_ab
    if args.encode:
        run_encode(args.ledgers, max(args.rounds, 5), args.encode_calls, args.cprofile)
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    run_checked(main)
