"""One chaos run: a fresh tenant and id range on the shared stack, planted artifacts, the load
test's workload with the seeded faults beside it, then heal, drain (bounded) and the checks:
S1 and L1 as the load test reads them (`benchmarks.load.checks`), L1 relaxed to "gone, or in
the dead-letter topic with a reason", and S2 over the planted artifacts."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import random
import time
from dataclasses import dataclass, field

from benchmarks.chaos.faults import Fault, FaultLog, Injector, plan
from benchmarks.chaos.intruder import Intruder, check_s2, plant
from benchmarks.chaos.stack import BUCKET, DELETERS, FOREIGN_BUCKET, ChaosStack
from benchmarks.load.checks import final_check
from benchmarks.load.stack import CLUSTER
from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import TopicState, Workload, WorkloadOptions
from devstack.simulator.s3 import ObjectStore
from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig
from services.core.errors import TombstoneError
from services.metadata import MetadataStore
from tombstone.v1 import deleter_pb2 as _dl
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

RATE = 6.0
"""Ledgers trimmed per second: low, so the faults (not the load) dominate a short run."""
DRAIN_TIMEOUT = 90.0


@dataclass
class RunResult:
    seed: int
    faults: collections.Counter[str]
    violations: list[str] = field(default_factory=list)
    unlinked: int = 0
    dead_lettered: int = 0
    """Unlinked (ledger, tier) not deleted but in the DLQ with a reason (allowed by L1)."""
    new_dead_letters: collections.Counter[str] = field(default_factory=collections.Counter)
    """Dead letters added during the run, by reason (forgeries, garbage, exhausted retries)."""
    fault_errors: list[str] = field(default_factory=list)
    restarted: collections.Counter[str] = field(default_factory=collections.Counter)
    drained: bool = False
    seconds: float = 0.0


class ChaosWorkload(Workload):
    """The load test's brokers, made to ride out outages: a topic whose write or re-read
    fails keeps re-reading its ML (as a broker does) instead of giving up the run."""

    async def _recover(self, topic: TopicState) -> None:
        await self._reload_until_read(topic)

    async def _reload_until_read(self, topic: TopicState) -> None:
        while True:
            try:
                await self._reload(topic)
                return
            except TombstoneError:
                await asyncio.sleep(0.5)


async def dead_letters(address: str) -> dict[tuple[int, int], str]:
    """(ledger id, tier) → reason code of every decodable dead letter."""
    channel = open_channel(ClientConfig(address))
    try:
        with rpc_errors("deleter"):
            response = await _dl_grpc.DeleterAdminStub(channel).ListDeadLetters(
                _dl.ListDeadLettersRequest(limit=10_000), timeout=60
            )
    finally:
        await channel.close()
    return {
        (letter.pdli.ledger_id, letter.pdli.ledger_type): letter.reason_code
        for letter in response.dead_letters
        if letter.HasField("pdli") and letter.reason_code
    }


async def dead_letters_by_reason(address: str) -> collections.Counter[str]:
    """The deleter's count of dead letters by reason code (the whole topic)."""
    channel = open_channel(ClientConfig(address))
    try:
        with rpc_errors("deleter"):
            status = await _dl_grpc.DeleterAdminStub(channel).GetStatus(
                _dl.GetStatusRequest(), timeout=60
            )
    finally:
        await channel.close()
    return collections.Counter(dict(status.dead_letters_by_reason))


async def drain(tracker: Tracker, stack: ChaosStack, timeout: float) -> dict[tuple[int, int], str]:
    """Poll until every pending (ledger, tier) is gone or dead-lettered, or `timeout` passes;
    returns the dead letters last read."""
    deadline = time.monotonic() + timeout
    letters: dict[tuple[int, int], str] = {}
    while time.monotonic() < deadline:
        await tracker.poll_once()
        if not tracker.pending:
            break
        with contextlib.suppress(TombstoneError):
            letters = await dead_letters(stack.services[DELETERS[0]].address)
        if set(tracker.pending) <= set(letters):
            break
        await asyncio.sleep(1.0)
    with contextlib.suppress(TombstoneError):
        letters = await dead_letters(stack.services[DELETERS[0]].address)
    return letters


async def one_run(
    stack: ChaosStack,
    store: MetadataStore,
    objects: ObjectStore,
    intruder: Intruder,
    *,
    seed: int,
    duration: float,
    run_index: int,
) -> RunResult:
    rng = random.Random(seed)
    faults: list[Fault] = plan(rng, duration)
    started_at = time.monotonic()
    options = WorkloadOptions(
        brokers=2, topics=3, rate=RATE, duration=duration, seed=seed,
        tenant=f"chaos-{run_index}-{seed}",
    )  # fmt: skip
    channel = open_channel(ClientConfig(stack.marker_address))
    tracker = Tracker(store, objects, BUCKET)
    workload = ChaosWorkload(
        options, store=store, objects=objects, marker=channel,
        bucket=BUCKET, cluster=CLUSTER, on_marked=tracker.add,
    )  # fmt: skip
    result = RunResult(seed, collections.Counter())
    admin = stack.services[DELETERS[0]].address
    try:
        before = await dead_letters_by_reason(admin)
        await workload.prepare()
        planted = await plant(workload, objects, rng, FOREIGN_BUCKET)
        injector = Injector(stack, intruder, list(planted.ledger_ids))
        stop = asyncio.Event()
        background = [
            asyncio.create_task(tracker.run(stop)),
            asyncio.create_task(injector.watchdog(stop)),
            asyncio.create_task(_follow_listed(workload, injector, stop)),
        ]
        started = time.monotonic()
        faulting = asyncio.create_task(injector.run(faults, started))
        try:
            await workload.run()
            await faulting
        finally:
            stop.set()
            faulting.cancel()
            await asyncio.gather(faulting, *background, return_exceptions=True)
        await injector.heal()
        letters = await drain(tracker, stack, DRAIN_TIMEOUT)
        result.drained = not tracker.pending
        check = await final_check(workload, tracker)
        result.violations += [f"S1: {v}" for v in check.s1_violations]
        for remaining in check.l1_remaining:
            # "unlinked ledger <id> remains: <znode path | object key>"
            words = remaining.split()
            tier = _pd.LEDGER if words[-1].startswith("/") else _pd.OFFLOAD_LEDGER
            if (int(words[2]), tier) in letters:
                result.dead_lettered += 1
            else:
                result.violations.append(f"L1: {remaining} (not in the DLQ)")
        result.violations += await check_s2(workload, objects, planted)
        result.unlinked = len(tracker.marked)
        with contextlib.suppress(TombstoneError):
            result.new_dead_letters = await dead_letters_by_reason(admin) - before
        result.faults = injector.log.done
        result.fault_errors = injector.log.errors
        result.restarted = injector.log.restarted
    finally:
        await channel.close()
    result.seconds = time.monotonic() - started_at
    return result


async def _follow_listed(workload: Workload, injector: Injector, stop: asyncio.Event) -> None:
    """Keep the forgeries' targets up to date with ledgers the MLs list now."""
    while not stop.is_set():
        injector.listed = [
            entry.ledgerId for topic in workload.topics for entry in topic.info.ledgerInfo
        ]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


__all__ = ["FaultLog", "RunResult", "one_run"]
