"""Verdicts per second of one verifier process, beside the raw aiozk read rate of the same run.

    .venv/bin/python -m benchmarks.verifier [--ledgers 100000] [--topics 2000]
        [--sample 20000] [--concurrency 256] [--rounds 3] [--grpc-batch 500] [--sign]
        [--profile DIR] [--smoke]

Starts its own ZooKeeper and writes a cluster of `--ledgers` BookKeeper ledgers (v3 format,
Pulsar custom metadata) spread over `--topics` managed ledgers, each listing only its newest
ledger, directly with the metadata layer. Then, for `--sample` unlisted ledgers per round, it
measures in turn:
- raw: `aiozk` get_data of each ledger znode (the one read a verdict needs);
- raw multiRead: the same znodes read by aiozk sending multiRead requests itself, in batches
  of `--grpc-batch` paths (each split in chunks of 256, as `get_many` does);
- verify (not believed): `DecisionEngine.verify` (full check: owner from the watched cache,
  ledger read, decode, custom-metadata match), cold then warm cache;
- verify_batch: `DecisionEngine.verify_batch` of `--grpc-batch` PDLIs per call (the ledger
  znodes prefetched with one `get_many`);
- believed, believed verify_batch: the same after a Believe of all of them;
- gRPC: `VerifyBatch` calls of `--grpc-batch` PDLIs to an in-process server, from a client
  in the same process (so the figure includes both sides of gRPC on one event loop), before
  and after a `Believe` RPC of all of them.
- with `--sign`: verify_batch and grpc VerifyBatch again with every PDLI signed by the
  marker key the verifier trusts (the signature is checked before each decision), printed
  beside the unsigned figures of the same round.
Batched calls run with as many calls in flight as hold `--concurrency` PDLIs, plus one.
Every verdict must be DELETE and every raw read find its znode, or the run fails. Verdict log
lines are filtered (level warning): the figures are those of the decision, not of writing
100,000 log lines. Each batched measurement also prints the process's CPU time per item,
and the raw multiRead's as a ratio to it: on a shared machine this moves less than rates do.

With `--profile DIR` every batched measurement (raw multiRead, verify_batch, gRPC VerifyBatch
and their believed and signed variants) runs under cProfile, one profile per measurement
summed over the rounds, written to `DIR/<measurement>.prof` (read them with `pstats`); the
rates of a profiled run are slower than unprofiled ones and are not figures to compare.

With `--metadata oxia` the cluster is written to a devstack Oxia server (`--shards`, a child
process: `benchmarks/_oxia.py`) and the verifier reads it through the Oxia adapter
(`--threads` threads). The yardstick is then the raw `oxia` client's `get` of the same keys
from as many plain threads; Oxia has no multi-get, so there is no raw multiRead line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from statistics import median
from typing import Any

import aiozk
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc import aio

from benchmarks._oxia import in_threads, oxia_server, raw_client, zookeeper_config
from benchmarks._pool import run_pool
from benchmarks._truth import UndoneWork, parse, require, require_count, run
from devstack.zookeeper import ZooKeeperServer
from services.core.config import GrpcServerConfig, LogConfig, ZooKeeperConfig
from services.core.logging import configure_logging
from services.core.metrics import Metrics
from services.core.s3_locations import S3Location
from services.core.signing import IntentSigner, TrustedKeys
from services.metadata import (
    BookKeeperLedgers,
    LedgerMetadata,
    LedgerState,
    ManagedLedgerInfo,
    ManagedLedgers,
    Segment,
    ZkMetadataStore,
)
from services.metadata.layout import format_ledgers_root
from services.metadata.oxia import OxiaMetadataStore
from services.metadata.store import MetadataStore, Versioned
from services.metadata.zookeeper.store import MULTI_READ_CHUNK
from services.metadata.zookeeper.wire import MultiReadRequest
from services.verifier.app import build, open_verifier
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, Verdict
from services.verifier.ports import ObjectHead
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from tombstone.v1 import pending_delete_pb2 as pb
from tombstone.v1 import verifier_pb2 as vpb
from tombstone.v1 import verifier_pb2_grpc as vpb_grpc

BENCH_TIMEOUT_S = 900.0
MARKER_KEY = Ed25519PrivateKey.generate()
SIGNER = IntentSigner({"bench": MARKER_KEY}, "bench")


def ml_name(topic: int) -> str:
    return f"bench/ns-{topic % 10}/persistent/topic-{topic}"


def ledger(ledger_id: int, topic: int) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        length=5_000_000,
        last_entry_id=49_999,
        segments=(Segment(0, ("bookie-1:3181", "bookie-2:3181", "bookie-3:3181")),),
        custom_metadata={
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": ml_name(topic).encode(),
        },
    )


class _NoObjects:
    """The benchmark decides BookKeeper PDLIs only: no HEAD is ever made."""

    async def head(
        self, *, bucket: str, key: str, location: S3Location | None = None
    ) -> ObjectHead | None:
        raise AssertionError("no object store in this benchmark")

    async def read_range(
        self,
        *,
        bucket: str,
        key: str,
        start: int,
        length: int,
        location: S3Location | None = None,
    ) -> bytes | None:
        raise AssertionError("no object store in this benchmark")


async def seed(store: MetadataStore, n: int, topics: int, concurrency: int) -> None:
    """n ledgers, ledger i owned by topic i % topics; each topic lists its newest ledger."""
    await format_ledgers_root(store)
    ledgers = BookKeeperLedgers(store)
    started = time.perf_counter()
    await run_pool(range(n), concurrency, lambda i: ledgers.create(ledger(i, i % topics)))
    mls = ManagedLedgers(store)

    async def write_ml(topic: int) -> None:
        info = ManagedLedgerInfo()
        newest = max(i for i in range(topic, n, topics))
        info.ledgerInfo.add(ledgerId=newest, entries=10, size=100, timestamp=1)
        await mls.create(ml_name(topic), info)

    await run_pool(range(topics), concurrency, write_ml)
    print(f"seeded {n:,} ledgers in {topics:,} topics in {time.perf_counter() - started:.0f}s")


def check(verdicts: Sequence[Verdict]) -> None:
    for verdict in verdicts:
        if verdict.decision is not Decision.DELETE:
            raise UndoneWork(f"a verdict was not DELETE: {verdict}")


def pdli(ledger_id: int, topics: int) -> pb.PendingDeleteLedgerInfo:
    return pb.PendingDeleteLedgerInfo(
        ledger_id=ledger_id,
        ledger_type=pb.LEDGER,
        component=pb.MANAGED_LEDGER,
        managed_ledger_name=ml_name(ledger_id % topics),
        source=pb.BROKER,
    )


def trusted() -> TrustedKeys:
    return TrustedKeys({"bench": MARKER_KEY.public_key()})


def signed(
    messages: dict[int, pb.PendingDeleteLedgerInfo],
) -> dict[int, pb.PendingDeleteLedgerInfo]:
    """Signed copies, signed together as the marker signs what it sends together (one
    signature per batch of 64)."""
    copies = {}
    for ledger_id, message in messages.items():
        copies[ledger_id] = copy = pb.PendingDeleteLedgerInfo()
        copy.CopyFrom(message)
    SIGNER.sign(*copies.values())
    return copies


def sample(n: int, topics: int, size: int, round_index: int) -> list[int]:
    """Unlisted ledger ids (not the newest of their topic), a different slice each round."""
    unlisted = [i for i in range(n) if i + topics < n]
    start = (round_index * size) % max(1, len(unlisted) - size)
    return unlisted[start : start + size]


class Bench:
    def __init__(self, args: argparse.Namespace, address: str) -> None:
        self.args = args
        self.address = address
        self.oxia = args.metadata == "oxia"
        self.config = VerifierConfig(
            grpc=GrpcServerConfig(port=0),
            zookeeper=ZooKeeperConfig(servers=address, operation_timeout=timedelta(seconds=30)),
            shadow_scan_interval=timedelta(0),
            owner_cache_size=max(100_000, args.topics),
            max_batch=max(1000, args.grpc_batch),
            trusted_keys=trusted(),
        )
        if self.oxia:
            zk = zookeeper_config(address, self.config.zookeeper)
            self.config = replace(self.config, zookeeper=zk)
        self.rates: dict[str, list[float]] = {}
        self.profiles: dict[str, cProfile.Profile] = {}
        self.cpu: dict[str, list[float]] = {}
        """The process's CPU seconds per verdict (or read) of each batched measurement."""

    def record(self, name: str, rate: float) -> None:
        self.rates.setdefault(name, []).append(rate)

    async def run(self) -> None:
        if self.oxia:
            await self.run_oxia()
            return
        args = self.args
        raw = aiozk.ZKClient(self.address, session_timeout=30)
        await raw.start()
        try:
            async with ZkMetadataStore.connect(self.address, session_timeout=30.0) as store:
                await seed(store, args.ledgers, args.topics, args.concurrency)
                for index in range(args.rounds):
                    await self.round(index, raw, store)
        finally:
            await raw.close()

    async def run_oxia(self) -> None:
        args = self.args
        with raw_client(self.address) as raw:
            async with OxiaMetadataStore.connect(
                self.address, session_timeout=30.0, request_timeout=30.0, max_threads=args.threads
            ) as store:
                await seed(store, args.ledgers, args.topics, args.concurrency)
                for index in range(args.rounds):
                    await self.round(index, raw, store)

    async def raw_oxia_reads(self, raw: Any, paths: list[str]) -> float:
        """The raw client's `get` of each path from `--threads` plain threads."""

        def get(path: str) -> None:
            _key, value, _version = raw.get(path)
            require(value, f"raw get {path}: no value")

        return await in_threads(paths, self.args.threads, get)

    async def round(self, index: int, raw: Any, store: MetadataStore) -> None:
        args = self.args
        ids = sample(args.ledgers, args.topics, args.sample, index)
        paths = BookKeeperLedgers(store)
        batches = [ids[i : i + args.grpc_batch] for i in range(0, len(ids), args.grpc_batch)]

        async def raw_read(ledger_id: int) -> object:
            return await raw.get_data(paths.path(ledger_id))

        async def raw_reads() -> float:
            if self.oxia:
                return await self.raw_oxia_reads(raw, [paths.path(i) for i in ids])
            return await run_pool(ids, args.concurrency, raw_read)

        async def raw_multi(batch: list[int]) -> object:
            full = [paths.path(i) for i in batch]
            chunks = [full[i : i + MULTI_READ_CHUNK] for i in range(0, len(full), MULTI_READ_CHUNK)]
            answers = await asyncio.gather(*(raw.session.send(MultiReadRequest(c)) for c in chunks))
            found = sum(isinstance(r, Versioned) for a in answers for r in a.results)
            require_count("raw multiRead znodes read", found, len(batch))
            return answers

        raw_before = await raw_reads()
        if not self.oxia:
            await self.batched("raw multiRead", batches, raw_multi)
        znodes = MetadataZnodeStore(store)
        parts = build(self.config, znodes, _NoObjects(), VerifierMetrics(Metrics()))
        requests = {i: pdli(i, args.topics) for i in ids}

        async def verify(ledger_id: int) -> None:
            check([await parts.engine.verify(requests[ledger_id])])

        async def verify_batch(batch: list[int]) -> None:
            check(await parts.engine.verify_batch([requests[i] for i in batch]))

        self.record("verify", await run_pool(ids, args.concurrency, verify))
        self.record("verify (warm cache)", await run_pool(ids, args.concurrency, verify))
        await self.batched("verify_batch", batches, verify_batch)
        if args.sign:
            unsigned = dict(requests)
            requests.update(signed(requests))
            await self.batched("verify_batch signed", batches, verify_batch)
            requests.update(unsigned)
        await parts.believed.add([parse_target(requests[i]).believed_key for i in ids])
        self.record("believed", await run_pool(ids, args.concurrency, verify))
        await self.batched("believed verify_batch", batches, verify_batch)
        await self.grpc_rates(batches, requests)
        # Raw reads before and after: their mean is the yardstick of this round (the machine
        # may be shared, so absolute rates drift between rounds).
        raw_after = await raw_reads()
        self.record("raw", (raw_before + raw_after) / 2)
        stats = parts.owners.stats
        hit = stats.hits / max(1, stats.hits + stats.misses)
        line = ", ".join(f"{name} {rates[-1]:,.0f}/s" for name, rates in self.rates.items())
        print(f"round {index + 1}: {line}; owner cache hit rate {hit:.1%}")

    async def batched(
        self, name: str, batches: list[list[int]], work: Callable[[list[int]], Awaitable[object]]
    ) -> None:
        """Record verdicts (or reads) per second as `name`, with `--grpc-batch` PDLIs per call
        and as many calls in flight as hold `--concurrency` PDLIs, plus one; under cProfile
        with `--profile`."""
        calls = max(1, self.args.concurrency // self.args.grpc_batch) + 1
        profile = None
        if self.args.profile is not None:
            profile = self.profiles.setdefault(name, cProfile.Profile())
            profile.enable()
        cpu = time.process_time()
        try:
            rate = await run_pool(range(len(batches)), calls, lambda n: work(batches[n]))
        finally:
            if profile is not None:
                profile.disable()
        items = sum(len(b) for b in batches)
        self.cpu.setdefault(name, []).append((time.process_time() - cpu) / items)
        self.record(name, rate * items / len(batches))

    def write_profiles(self) -> None:
        """One `.prof` per profiled measurement in `--profile`."""
        if self.args.profile is None:
            return
        self.args.profile.mkdir(parents=True, exist_ok=True)
        for name, profile in self.profiles.items():
            target = self.args.profile / f"{name.replace(' ', '_')}.prof"
            profile.dump_stats(target)
            print(f"profile of {name}: {target}")

    async def grpc_rates(
        self, batches: list[list[int]], requests: dict[int, pb.PendingDeleteLedgerInfo]
    ) -> None:
        """VerifyBatch through a real gRPC server and client, before and after a Believe."""
        config = replace(
            self.config,
            believed=replace(self.config.believed, root="/bench-grpc"),
            trusted_keys=trusted(),  # its own: no batch root remembered from the runs before
        )
        async with open_verifier(config) as (runner, _parts):
            await runner.start()
            async with aio.insecure_channel(f"127.0.0.1:{runner.port}") as channel:
                stub = vpb_grpc.VerifierStub(channel)

                async def call(batch: list[int]) -> None:
                    chunk = [requests[i] for i in batch]
                    response = await stub.VerifyBatch(vpb.VerifyBatchRequest(pdlis=chunk))
                    if any(v.decision != vpb.DELETE for v in response.verdicts):
                        raise UndoneWork("a VerifyBatch verdict was not DELETE")

                await self.batched("grpc VerifyBatch", batches, call)
                if self.args.sign:
                    unsigned = dict(requests)
                    requests.update(signed(requests))
                    await self.batched("grpc VerifyBatch signed", batches, call)
                    requests.update(unsigned)
                await stub.Believe(vpb.BelieveRequest(pdlis=list(requests.values())))
                await self.batched("believed grpc VerifyBatch", batches, call)

    def report(self) -> None:
        order = ["raw", "raw multiRead", *[n for n in self.rates if not n.startswith("raw")]]
        store = (
            f"oxia shards={self.args.shards} threads={self.args.threads}"
            if self.oxia
            else "zookeeper"
        )
        print(
            f"metadata={store} ledgers={self.args.ledgers:,} topics={self.args.topics:,} "
            f"sample={self.args.sample:,}/round concurrency={self.args.concurrency} "
            f"batch={self.args.grpc_batch} rounds={self.args.rounds}"
        )
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        if self.oxia:
            # The ratio first: absolute rates are the in-process Python server's.
            print(
                f"verify_batch / raw oxia get: {self.ratio('verify_batch', 'raw'):.0%} "
                f"(median of rounds); verify_batch {median(self.rates['verify_batch']):,.0f}/s, "
                f"raw get {median(self.rates['raw']):,.0f}/s; load average {load}"
            )
        for name in (n for n in order if n in self.rates):
            rates = self.rates[name]
            versus = f"vs raw {self.ratio(name, 'raw'):5.0%}"
            if "raw multiRead" in self.rates:
                versus += f"  vs raw multiRead {self.ratio(name, 'raw multiRead'):4.0%}"
            print(f"{name:26s} median {median(rates):8,.0f}/s  best {max(rates):8,.0f}/s  {versus}")
        if "raw multiRead" in self.cpu:
            # CPU per item moves less with the machine's load than rates do: the process's
            # own CPU time (the client's, and the gRPC server's too, both in this process).
            base = median(self.cpu["raw multiRead"])
            for name, seconds in self.cpu.items():
                per = median(seconds)
                print(
                    f"{name:26s} CPU {per * 1e6:7.1f} µs per item (median of rounds)  "
                    f"raw multiRead / this {base / per:4.0%}"
                )
        for name in ("verify_batch", "grpc VerifyBatch"):
            if f"{name} signed" in self.rates:
                print(f"{name}: signed / unsigned {self.ratio(f'{name} signed', name):.0%}")
        print(f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())}")

    def ratio(self, name: str, base: str) -> float:
        """Median of the per-round ratios to `base` measured in the same round."""
        pairs = zip(self.rates[name], self.rates[base], strict=True)
        return median(rate / yardstick for rate, yardstick in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=2_000)
    parser.add_argument("--sample", type=int, default=20_000, help="verdicts per measurement")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grpc-batch", type=int, default=500)
    parser.add_argument("--sign", action="store_true", help="also verify signed PDLIs")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="a directory: each batched measurement runs under cProfile, stats written there",
    )
    parser.add_argument(
        "--metadata",
        choices=("zookeeper", "oxia"),
        default="zookeeper",
        help="the metadata store the cluster is written to and the verifier reads",
    )
    parser.add_argument("--shards", type=int, default=3, help="Oxia shards (--metadata oxia)")
    parser.add_argument(
        "--threads", type=int, default=16, help="the Oxia adapter's threads, and the raw client's"
    )
    args = parse(
        parser,
        {
            "ledgers": 400,
            "topics": 20,
            "sample": 100,
            "concurrency": 32,
            "rounds": 1,
            "grpc_batch": 50,
            "sign": True,
        },
    )
    configure_logging(LogConfig(level="warning", format="json"), stream=sys.stderr)
    logging.getLogger("aiozk").setLevel(logging.ERROR)
    servers = oxia_server(args.shards) if args.metadata == "oxia" else contextlib.nullcontext(None)
    with servers as oxia_address, contextlib.ExitStack() as stack:
        address = oxia_address or stack.enter_context(ZooKeeperServer()).address
        bench = Bench(args, address)
        asyncio.run(asyncio.wait_for(bench.run(), BENCH_TIMEOUT_S))
    bench.report()
    bench.write_profiles()


if __name__ == "__main__":
    run(main)
