"""Deleter throughput end to end, beside the raw clients in the same run; peak RSS under a
large backlog.

    .venv/bin/python -m benchmarks.deleter [--ledgers 5000] [--offloaded 1000] [--backlog 1000000]
        [--smoke]
    .venv/bin/python -m benchmarks.deleter --adaptive [--ledgers 3000] [--levels 1,4,16,64]

Starts its own ZooKeeper, S3 (moto) and devstack broker, a verifier and deleters as child
processes (as deployed). Figures:
- BookKeeper: closed Pulsar ledgers that no ML lists, one PDLI each on the system topic;
  acknowledged per second by one deleter (verify batch, conditional znode delete, parents,
  ack), beside raw aiozk get + delete of as many other ledger znodes (concurrency 64).
- Offload: offloaded ledgers (two objects each) with an OFFLOAD_LEDGER PDLI each, beside raw
  aiobotocore DeleteObjects of the same number of keys in 1,000-key requests; once with
  unsigned PDLIs and once with PDLIs signed by a marker key the verifier trusts (each
  signature checked before the decision).
- Memory: the peak RSS (VmHWM) of a deleter consuming a backlog of `--backlog` PDLIs.

With `--metadata oxia`, only the BookKeeper figure, on a devstack Oxia server (`--shards`, a
child process: `benchmarks/_oxia.py`) that the verifier and the deleter reach through
TOMBSTONE_METADATA_STORE_URL, beside the raw `oxia` client's get + conditional delete
(`expected_version_id`) of as many other ledger keys from as many plain threads as the
adapter has (16). Offload and memory do not touch the metadata store and are not run.

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
import uuid as _uuid
from dataclasses import dataclass
from pathlib import Path

import aiozk
import boto3
from aiobotocore.session import get_session

from benchmarks._deleter_adaptive import report as report_adaptive
from benchmarks._deleter_adaptive import sweep
from benchmarks._deleter_stack import (
    BUCKET,
    CLUSTER,
    CONCURRENCY,
    ML,
    Metadata,
    OxiaMetadata,
    bounded,
    connect,
    create_topics,
    deleter_child,
    encode,
    ledger,
    metric,
    offload_keys,
    pdli,
    publish,
    rate_until,
    signed,
    start_verifier,
    write_ledgers,
)
from benchmarks._oxia import in_threads, oxia_server, raw_client
from benchmarks._truth import UndoneWork, parse, require, run
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator._factory import PULSAR_VERSION, object_user_metadata
from devstack.simulator.blobs import object_body
from devstack.simulator.model import Ledger as SimLedger
from devstack.simulator.model import LedgerKind, OffloadObject
from devstack.zookeeper import ZooKeeperServer
from services.metadata import LedgerPaths
from services.metadata.oxia.limits import DEFAULT_MAX_THREADS


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


async def raw_oxia(address: str, ids: range) -> float:
    """The raw oxia client: get each ledger key (value + version), delete it at that version
    (`expected_version_id`), from as many threads as the adapter's pool."""
    paths = LedgerPaths()

    def get_and_delete(ledger_id: int) -> None:
        path = paths.ledger_path(ledger_id)
        _key, _value, version = raw.get(path)
        require(raw.delete(path, expected_version_id=version.version_id()), f"raw delete {path}")

    with raw_client(address) as raw:
        return await in_threads(list(ids), DEFAULT_MAX_THREADS, get_and_delete)


def put_objects(s3: S3Server, uuids: dict[int, str]) -> None:
    """The data and index objects of each ledger as Pulsar's `BlobStoreManagedLedgerOffloader`
    of `PULSAR_VERSION` (4.0.4) writes them: user metadata with the version keys and, since
    2.10, cluster, role and ML name (the verifier's identity check reads them); bodies in its
    layout (`devstack.simulator.blobs`: a data block, an index around the ledger's metadata)."""
    client = boto3.client("s3", **s3.client_config())
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=BUCKET)
    for ledger_id, offload_uuid in uuids.items():
        source = SimLedger(ledger(ledger_id), LedgerKind.DATA, ML, None, False, False)
        for key, role in zip(offload_keys(offload_uuid, ledger_id), ("data", "index"), strict=True):
            metadata = object_user_metadata(CLUSTER, role, ML, PULSAR_VERSION)
            obj = OffloadObject(
                BUCKET, key, role, ledger_id, offload_uuid, ML, CLUSTER, metadata, source
            )
            client.put_object(Bucket=BUCKET, Key=key, Body=object_body(obj), Metadata=metadata)


async def raw_delete_objects(s3: S3Server, keys: list[str]) -> float:
    """Raw aiobotocore DeleteObjects in 1,000-key requests; keys (objects) per second."""
    async with get_session().create_client("s3", **s3.client_config()) as client:
        started = time.perf_counter()
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[start : start + 1000]]
            await client.delete_objects(Bucket=BUCKET, Delete={"Objects": chunk, "Quiet": True})
        return len(keys) / (time.perf_counter() - started)


async def raw_heads(s3: S3Server, keys: list[str]) -> float:
    """Raw aiobotocore HEAD requests per second (concurrency 64): the server's per-request
    rate, which bounds anything that needs a request per ledger."""
    async with get_session().create_client("s3", **s3.client_config()) as client:

        async def head(key: str) -> None:
            with contextlib.suppress(Exception):
                await client.head_object(Bucket=BUCKET, Key=key)

        started = time.perf_counter()
        await bounded(keys, head, CONCURRENCY)
        return len(keys) / (time.perf_counter() - started)


@dataclass
class Parts:
    zk: Metadata
    s3: S3Server
    broker: PulsarBrokerProcess
    verifier: str
    workdir: Path


async def run_deleter(p: Parts, name: str, target: int) -> float:
    child, port = deleter_child(p.zk, p.s3, p.broker, p.verifier, p.workdir / f"{name}.log")
    await child.start()
    try:
        rate = await rate_until(port, target, timeout=600)
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


async def bookkeeper(p: Parts, n: int) -> tuple[float, float]:
    print(f"writing {2 * n} ledger znodes...")
    await write_ledgers(p.zk, range(1, 2 * n + 1))
    others = range(n + 1, 2 * n + 1)
    if isinstance(p.zk, OxiaMetadata):
        raw = await raw_oxia(p.zk.address, others)
    else:
        raw = await raw_zookeeper(p.zk, others)
    await publish(p.broker, encode(pdli(i) for i in range(1, n + 1)))
    e2e = await run_deleter(p, "bookkeeper", n)
    left = await ledgers_left(p.zk, range(1, n + 1))
    if left:
        raise UndoneWork(f"{left} of the {n} ledger znodes the deleter had are still there")
    return e2e, raw


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


async def offload(p: Parts, n: int, *, sign: bool) -> tuple[float, float, float]:
    base = 20_000_000 if sign else 10_000_000
    uuids = {i: str(_uuid.uuid4()) for i in range(base, base + 2 * n)}
    keys = {i: offload_keys(u, i) for i, u in uuids.items()}
    print(f"writing {4 * n} objects...")
    await asyncio.to_thread(put_objects, p.s3, uuids)
    raw_keys = [k for i in range(base + n, base + 2 * n) for k in keys[i]]
    heads = await raw_heads(p.s3, raw_keys)
    raw = await raw_delete_objects(p.s3, raw_keys) / 2  # two objects per ledger
    intents = [pdli(i, uuids[i]) for i in range(base, base + n)]
    await publish(p.broker, encode(signed(intents) if sign else intents))
    e2e = await run_deleter(p, "offload signed" if sign else "offload", n)
    left = await asyncio.to_thread(
        objects_left, p.s3, [k for i in intents for k in keys[i.ledger_id]]
    )
    if left:
        raise UndoneWork(f"{left} of the {2 * n} objects the deleter had are still there")
    return e2e, raw, heads


def objects_left(s3: S3Server, keys: list[str]) -> int:
    """How many of these objects still exist."""
    client = boto3.client("s3", **s3.client_config())
    present: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        present.update(item["Key"] for item in page.get("Contents", []))
    return len(present.intersection(keys))


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
        verifier_child, verifier = await start_verifier(zk, s3, workdir)
        parts = Parts(zk, s3, broker, verifier, workdir)
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
            bk = await bookkeeper(parts, args.ledgers)
            if oxia:
                report_oxia(args, bk)
                return
            nan = float("nan")
            none = (nan, nan, nan)
            off = await offload(parts, args.offloaded, sign=False) if args.offloaded else none
            off_signed = await offload(parts, args.offloaded, sign=True) if args.offloaded else none
            mem = await memory(parts, args.backlog, args.seconds) if args.backlog else (nan, nan)
        finally:
            await verifier_child.stop()
    report(args, bk, off, off_signed, mem)


def report_oxia(args: argparse.Namespace, bk: tuple[float, float]) -> None:
    """The ratio first: absolute rates are those of the devstack server (Python)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print()
    print(
        f"deleter / raw oxia get + versioned delete: {bk[0] / bk[1]:.0%}; "
        f"deleter {bk[0]:.0f} ledgers/s, raw {bk[1]:.0f} ledgers/s "
        f"({args.ledgers} ledgers each, {args.shards} shards); load average {load}"
    )


def report(
    args: argparse.Namespace,
    bk: tuple[float, float],
    off: tuple[float, float, float],
    off_signed: tuple[float, float, float],
    mem: tuple[float, float],
) -> None:
    print()
    print("| | deleter (end to end) | raw client | ratio |")
    print("| --- | --- | --- | --- |")
    print(
        f"| BookKeeper ledgers/s | {bk[0]:.0f} | {bk[1]:.0f} (aiozk get + delete) "
        f"| {bk[0] / bk[1]:.2f} |"
    )
    print(
        f"| offloaded ledgers/s | {off[0]:.0f} | {off[1]:.0f} (DeleteObjects, 2 keys a ledger) "
        f"| {off[0] / off[1]:.2f} |"
    )
    print(
        f"| offloaded ledgers/s, signed PDLIs | {off_signed[0]:.0f} | {off_signed[1]:.0f} "
        f"(DeleteObjects, 2 keys a ledger) | {off_signed[0] / off_signed[1]:.2f} |"
    )
    print(
        f"S3 server: {off[2]:.0f} single-object requests/s (raw HEAD, concurrency 64); each "
        "offloaded ledger costs 1 such request (the verifier's HEAD of its data object) plus "
        "its share of a DeleteObjects"
    )
    print(
        f"peak RSS with a backlog of {args.backlog} PDLIs: {mem[0]:.0f} MB "
        f"({mem[1]:.0f} settled in {args.seconds:.0f} s)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ledgers", type=int, default=5000)
    parser.add_argument("--offloaded", type=int, default=1000)
    parser.add_argument("--backlog", type=int, default=1_000_000)
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
        "--levels", default="1,4,16,64", help="static ZooKeeper limits swept (--adaptive)"
    )
    args = parse(parser, {"ledgers": 20, "offloaded": 10, "backlog": 200, "seconds": 2.0})
    if args.adaptive and args.metadata == "oxia":
        parser.error("--adaptive compares ZooKeeper concurrency limits: not with --metadata oxia")
    run(lambda: asyncio.run(main(args)))
