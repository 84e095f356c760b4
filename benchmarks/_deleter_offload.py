"""`benchmarks.deleter`'s offload run: offloaded ledgers deleted end to end, in interleaved
rounds beside raw DeleteObjects, with the CPU each server process spent.

Each round writes the objects of 3 x N new ledgers, then: raw aiobotocore HEADs of N ledgers'
keys (the S3 server's single-object request rate) and raw DeleteObjects of the same keys in
1,000-key requests; a deleter settling N unsigned OFFLOAD_LEDGER PDLIs; a deleter settling N
PDLIs signed by the marker key the verifier trusts. The ratio of each round compares runs made
seconds apart on the same servers. During the end-to-end runs the CPU time of the moto server
and of the verifier is read from /proc: the process near one full core is the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import time
import uuid as _uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import boto3
from aiobotocore.session import get_session
from botocore.exceptions import ClientError

from benchmarks._deleter_stack import (
    BUCKET,
    CLUSTER,
    CONCURRENCY,
    ML,
    bounded,
    encode,
    ledger,
    offload_keys,
    pdli,
    publish,
    signed,
)
from benchmarks._proc import cpu_seconds
from benchmarks._truth import UndoneWork
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator._factory import PULSAR_VERSION, object_user_metadata
from devstack.simulator.blobs import object_body
from devstack.simulator.model import Ledger as SimLedger
from devstack.simulator.model import LedgerKind, OffloadObject

RunDeleter = Callable[[str, int], Awaitable[float]]
"""Starts a deleter child named so, returns its acknowledgements per second once it settled
that many PDLIs (and fails unless they were all deletions)."""


@dataclass(frozen=True)
class OffloadRound:
    raw: float
    """Raw DeleteObjects, ledgers/s (two keys a ledger)."""
    heads: float
    """Raw HEADs/s at concurrency 64: the S3 server's single-object request rate."""
    unsigned: float
    signed: float
    """End to end, offloaded ledgers/s."""
    moto_cpu: float
    verifier_cpu: float
    """Cores used during the two end-to-end runs (CPU seconds / wall seconds)."""
    moto_ms_per_head: float
    moto_ms_per_ledger: float
    """The S3 server's CPU per raw HEAD, and per ledger deleted end to end."""
    load: str


async def put_objects(s3: S3Server, uuids: dict[int, str]) -> None:
    """The data and index objects of each ledger as Pulsar's `BlobStoreManagedLedgerOffloader`
    of `PULSAR_VERSION` (4.0.4) writes them: user metadata with the version keys and, since
    2.10, cluster, role and ML name (the verifier's identity check reads them); bodies in its
    layout (`devstack.simulator.blobs`: a data block, an index around the ledger's metadata).
    Written 64 at a time."""
    async with get_session().create_client("s3", **s3.client_config()) as client:
        with contextlib.suppress(ClientError):  # already there from an earlier round
            await client.create_bucket(Bucket=BUCKET)

        async def put(ledger_id: int) -> None:
            offload_uuid = uuids[ledger_id]
            source = SimLedger(ledger(ledger_id), LedgerKind.DATA, ML, None, False, False)
            keys = offload_keys(offload_uuid, ledger_id)
            for key, role in zip(keys, ("data", "index"), strict=True):
                metadata = object_user_metadata(CLUSTER, role, ML, PULSAR_VERSION)
                obj = OffloadObject(
                    BUCKET, key, role, ledger_id, offload_uuid, ML, CLUSTER, metadata, source
                )
                await client.put_object(
                    Bucket=BUCKET, Key=key, Body=object_body(obj), Metadata=metadata
                )

        await bounded(uuids, put, CONCURRENCY)


async def raw_delete_objects(s3: S3Server, keys: list[str]) -> float:
    """Raw aiobotocore DeleteObjects in 1,000-key requests; keys (objects) per second."""
    async with get_session().create_client("s3", **s3.client_config()) as client:
        started = time.perf_counter()
        for start in range(0, len(keys), 1000):
            chunk = [{"Key": key} for key in keys[start : start + 1000]]
            await client.delete_objects(Bucket=BUCKET, Delete={"Objects": chunk, "Quiet": True})
        return len(keys) / (time.perf_counter() - started)


async def raw_heads(s3: S3Server, keys: list[str]) -> tuple[float, float]:
    """Raw aiobotocore HEADs per second (concurrency 64), and the S3 server's CPU ms per HEAD."""
    async with get_session().create_client("s3", **s3.client_config()) as client:

        async def head(key: str) -> None:
            with contextlib.suppress(Exception):
                await client.head_object(Bucket=BUCKET, Key=key)

        cpu = cpu_seconds(s3.pid)
        started = time.perf_counter()
        await bounded(keys, head, CONCURRENCY)
        wall = time.perf_counter() - started
        return len(keys) / wall, (cpu_seconds(s3.pid) - cpu) * 1000 / len(keys)


def objects_left(s3: S3Server, keys: list[str]) -> int:
    """How many of these objects still exist."""
    client = boto3.client("s3", **s3.client_config())
    present: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        present.update(item["Key"] for item in page.get("Contents", []))
    return len(present.intersection(keys))


async def one_round(
    s3: S3Server,
    broker: PulsarBrokerProcess,
    verifier_pid: int | None,
    run_deleter: RunDeleter,
    n: int,
    base: int,
) -> OffloadRound:
    uuids = {i: str(_uuid.uuid4()) for i in range(base, base + 3 * n)}
    keys = {i: offload_keys(u, i) for i, u in uuids.items()}
    print(f"writing {6 * n} objects...")
    await put_objects(s3, uuids)
    raw_keys = [k for i in range(base, base + n) for k in keys[i]]
    heads, ms_per_head = await raw_heads(s3, raw_keys)
    raw = await raw_delete_objects(s3, raw_keys) / 2  # two objects per ledger
    rates: list[float] = []
    cpu_before = (cpu_seconds(s3.pid), cpu_seconds(verifier_pid), time.perf_counter())
    for start, sign in ((base + n, False), (base + 2 * n, True)):
        intents = [pdli(i, uuids[i]) for i in range(start, start + n)]
        await publish(broker, encode(signed(intents) if sign else intents))
        rates.append(await run_deleter(f"offload-{base}-{'signed' if sign else 'unsigned'}", n))
        left = await asyncio.to_thread(
            objects_left, s3, [k for i in range(start, start + n) for k in keys[i]]
        )
        if left:
            raise UndoneWork(f"{left} of the {2 * n} objects the deleter had are still there")
    moto, verifier, wall = (
        after - before
        for after, before in zip(
            (cpu_seconds(s3.pid), cpu_seconds(verifier_pid), time.perf_counter()),
            cpu_before,
            strict=True,
        )
    )
    return OffloadRound(
        raw=raw,
        heads=heads,
        unsigned=rates[0],
        signed=rates[1],
        moto_cpu=moto / wall,
        verifier_cpu=verifier / wall,
        moto_ms_per_head=ms_per_head,
        moto_ms_per_ledger=moto * 1000 / (2 * n),
        load=" ".join(f"{x:.1f}" for x in os.getloadavg()),
    )


async def offload_rounds(
    s3: S3Server,
    broker: PulsarBrokerProcess,
    verifier_pid: int | None,
    run_deleter: RunDeleter,
    n: int,
    rounds: int,
) -> list[OffloadRound]:
    """`rounds` interleaved rounds of N ledgers each (raw, unsigned, signed)."""
    return [
        await one_round(s3, broker, verifier_pid, run_deleter, n, 10_000_000 * (r + 1))
        for r in range(rounds)
    ]


def report_offload(rounds: list[OffloadRound], n: int) -> None:
    """Per round and the medians: the ratios first, then the absolute figures and the load
    average, then where the CPU went."""
    if not rounds:
        return
    print()
    print(f"offload, {n} ledgers a run (2 objects each), {len(rounds)} interleaved rounds:")
    print(
        "| round | unsigned / raw | signed / raw | unsigned / raw HEADs | deleter unsigned, "
        "signed (ledgers/s) | raw DeleteObjects (ledgers/s) | raw HEADs/s | moto, verifier "
        "CPU (cores) | moto ms per raw HEAD, per ledger | load average |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for number, r in enumerate(rounds, 1):
        print(
            f"| {number} | {r.unsigned / r.raw:.3f} | {r.signed / r.raw:.3f} "
            f"| {r.unsigned / r.heads:.2f} | {r.unsigned:.0f}, {r.signed:.0f} | {r.raw:.0f} "
            f"| {r.heads:.0f} | {r.moto_cpu:.2f}, {r.verifier_cpu:.2f} "
            f"| {r.moto_ms_per_head:.2f}, {r.moto_ms_per_ledger:.2f} | {r.load} |"
        )
    med = statistics.median
    print(
        f"median: unsigned / raw {med(r.unsigned / r.raw for r in rounds):.3f}, signed / raw "
        f"{med(r.signed / r.raw for r in rounds):.3f}, unsigned / raw HEADs "
        f"{med(r.unsigned / r.heads for r in rounds):.2f}"
    )
