"""Simulated brokers: each owns topics whose managed ledgers roll over to new ledgers (some
offloaded to S3, some of those already gone from BookKeeper) and are trimmed through the
marker's gRPC API, the way a broker would do it in marker-writes mode (it passes the znode
version it holds and adopts the version the marker returns) — or, with `broker_style`, the
way an unmodified broker trims: its own list write, then its own failing deletes
(`benchmarks.load.brokers`).

Ledgers, ML znodes and offloaded objects are written in the real formats through the metadata
layer and the simulator's record factories.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from aiolimiter import AsyncLimiter
from grpc import aio

from benchmarks.load.brokers import BrokerTrimmer
from devstack.simulator import blobs
from devstack.simulator._factory import Factory, IdAllocator, LedgerShape, pulsar_metadata
from devstack.simulator.broker import DeleteFaults
from devstack.simulator.model import Ledger, LedgerKind, Offload
from devstack.simulator.s3 import ObjectStore
from devstack.simulator.spec import ClusterSpec, IdLayout
from devstack.simulator.znodes import offload_to_proto
from services.core.client import rpc_errors
from services.core.errors import TombstoneError
from services.metadata import (
    BookKeeperLedgers,
    LedgerLayout,
    LedgerPaths,
    LedgerState,
    ManagedLedgerInfo,
    ManagedLedgers,
    MetadataStore,
    NodeExists,
    VersionConflict,
    data_object_key,
    index_object_key,
    uuid_from_bits,
)
from services.metadata.paths import LAYOUT_ZNODE, layout_text
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

TENANT = "tombstone-load"
RUN_COUNTER = "/tombstone-load-runs"
# Load-test ledgers use 63-bit ids far above what a real cluster's generator hands out
# (2^44 + run << 32), so a run against a live cluster never collides with its ledgers.
ID_BASE = 1 << 44


@dataclass(frozen=True)
class WorkloadOptions:
    brokers: int
    topics: int
    rate: float
    """Ledgers trimmed per second, all brokers together."""
    duration: float
    keep: int = 2
    """Ledgers each topic keeps listed after a trim (the last one is the current ledger)."""
    batch: int = 2
    """Ledgers added, then trimmed, per topic round."""
    offloaded_share: float = 0.3
    bookkeeper_deleted_share: float = 0.5
    seed: int = 1
    tenant: str = TENANT
    """The tenant of every topic's ML name (a fresh one per run lets runs share a cluster)."""
    broker_style: bool = False
    """Trim as unmodified brokers do (no MarkLedgers call): list write, then own deletes."""
    delete_failure_share: float = 0.2
    """With `broker_style`: the share of the brokers' deletions that fail every attempt."""
    delete_backoff: float = 1.0
    """With `broker_style`: seconds between a broker's delete attempts (Pulsar: 60)."""


@dataclass(frozen=True)
class Marked:
    """One (ledger, tier) that left its owner's references — unlinked by the marker, or by a
    broker's own write in broker-style runs: it must end up deleted."""

    ledger_id: int
    tier: int
    marked_at: float
    object_keys: tuple[str, ...] = ()


@dataclass
class TopicState:
    ml_name: str
    version: int
    info: ManagedLedgerInfo
    keys: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Object keys of each listed offloaded ledger."""


@dataclass
class WorkloadStats:
    ledgers_created: int = 0
    mark_calls: int = 0
    marked: int = 0
    not_marked: int = 0
    conflicts: int = 0
    errors: list[str] = field(default_factory=list)
    mark_seconds: list[float] = field(default_factory=list)
    """Duration of each MarkLedgers call, as the simulated broker saw it."""


class Workload:
    def __init__(
        self,
        options: WorkloadOptions,
        *,
        store: MetadataStore,
        objects: ObjectStore,
        marker: aio.Channel | None,
        bucket: str,
        cluster: str,
        on_marked: Callable[[Marked], None],
    ) -> None:
        self.options = options
        self.store = store
        self.objects = objects
        self.stub = _mk_grpc.MarkerStub(marker) if marker is not None else None
        self.bucket = bucket
        self.on_marked = on_marked
        self.rng = random.Random(options.seed)
        spec = ClusterSpec(seed=options.seed, bucket=bucket, cluster_name=cluster, v2_share=0.0)
        self.factory = Factory(spec, IdAllocator(IdLayout.LONG))
        self.bk = BookKeeperLedgers(store, paths=LedgerPaths())
        self.mls = ManagedLedgers(store)
        self.topics: list[TopicState] = []
        self.stats = WorkloadStats()
        self.brokers: BrokerTrimmer | None = None
        if options.broker_style:
            faults = DeleteFaults(options.delete_failure_share, seed=options.seed)
            self.brokers = BrokerTrimmer(
                store, objects, self.mls, bucket=bucket, faults=faults,
                backoff_seconds=options.delete_backoff, on_unlinked=self._unlinked_by_broker,
            )  # fmt: skip
        elif self.stub is None:
            raise ValueError("trims through the marker need a marker channel")
        self._next_id = 0
        self._deadline = 0.0

    # --- setup -----------------------------------------------------------------------------

    async def prepare(self) -> None:
        """The ledgers root (if the cluster has none yet), this run's id range, the bucket and
        one ML znode per topic with its first (current) ledger."""
        if await self.store.exists("/ledgers") is None:
            await self.store.create("/ledgers", make_parents=True)
            await self.store.create(
                f"/ledgers/{LAYOUT_ZNODE}", layout_text(LedgerLayout.HIERARCHICAL)
            )
        self._next_id = ID_BASE + (await self._run_number() << 32)
        await self.objects.ensure_bucket(self.bucket)
        for b in range(self.options.brokers):
            for t in range(self.options.topics):
                ml_name = f"{self.options.tenant}/broker-{b}/persistent/topic-{t}"
                info = ManagedLedgerInfo()
                await self._add_ledger(ml_name, info, offloaded=False)
                try:
                    version = await self.mls.create(ml_name, info)
                except NodeExists:
                    raise RuntimeError(f"{ml_name} exists: a previous run left it") from None
                self.topics.append(TopicState(ml_name, version, info))

    async def _run_number(self) -> int:
        """A per-cluster run counter (compare-and-set), so every run has its own id range."""
        while True:
            with contextlib.suppress(NodeExists):
                await self.store.create(RUN_COUNTER, b"0")
            current = await self.store.get(RUN_COUNTER)
            run = int(current.data or b"0") + 1
            try:
                await self.store.set(RUN_COUNTER, str(run).encode(), version=current.version)
            except VersionConflict:
                continue
            return run

    # --- ledgers ---------------------------------------------------------------------------

    async def _add_ledger(self, ml_name: str, info: ManagedLedgerInfo, *, offloaded: bool) -> None:
        """A new closed ledger in BookKeeper (unless offloaded and already deleted there), its
        objects when offloaded, and its entry at the end of `info`."""
        ledger_id = self._next_id
        self._next_id += 1
        entries = self.rng.randint(1, 500)
        shape = LedgerShape(LedgerState.CLOSED, entries, entries * 1024)
        metadata = self.factory.ledger_metadata(ledger_id, shape, pulsar_metadata(ml_name=ml_name))
        bk_deleted = offloaded and self.rng.random() < self.options.bookkeeper_deleted_share
        entry = info.ledgerInfo.add(
            ledgerId=ledger_id, entries=entries, size=shape.length, timestamp=_now_ms()
        )
        writes: list[Coroutine[Any, Any, object]] = []
        if not bk_deleted:
            writes.append(self.bk.create(metadata, container_parents=True))
        if offloaded:
            ledger = Ledger(metadata, LedgerKind.DATA, ml_name, None, not bk_deleted, True)
            offload = self.factory.offload(_now_ms(), bookkeeper_deleted=bk_deleted)
            entry.offloadContext.CopyFrom(offload_to_proto(offload))
            writes.append(self._write_objects(ledger, offload, ml_name))
        await asyncio.gather(*writes)
        self.stats.ledgers_created += 1

    async def _write_objects(self, ledger: Ledger, offload: Offload, ml_name: str) -> None:
        keys = self.factory.add_objects(ledger, offload.uuid, ml_name)
        # Written once, not kept in memory.
        objects = [self.factory.model.objects.pop(key) for key in keys]
        await asyncio.gather(
            *(
                self.objects.put_object(
                    bucket=o.bucket, key=o.key, body=blobs.object_body(o), metadata=o.user_metadata
                )
                for o in objects
            )
        )

    # --- the brokers -----------------------------------------------------------------------

    async def run(self) -> None:
        """Every topic rolls over and trims at its share of the rate until the duration ends."""
        self._deadline = time.monotonic() + self.options.duration
        per_broker = self.options.rate / self.options.brokers
        limiters = [AsyncLimiter(per_broker, 1.0) for _ in range(self.options.brokers)]
        async with asyncio.TaskGroup() as group:
            for index, topic in enumerate(self.topics):
                group.create_task(self._topic_loop(topic, limiters[index // self.options.topics]))
        if self.brokers is not None:
            await self.brokers.wait()

    async def _topic_loop(self, topic: TopicState, limiter: AsyncLimiter) -> None:
        while time.monotonic() < self._deadline:
            await limiter.acquire(self.options.batch)
            if time.monotonic() >= self._deadline:
                return
            try:
                await self._roll_over(topic)
                await self._trim(topic)
            except TombstoneError as exc:
                self.stats.errors.append(f"{topic.ml_name}: {exc}")
                await self._recover(topic)

    async def _recover(self, topic: TopicState) -> None:
        """After a failed write or re-read: re-read the topic's ML once (a failure here ends
        the run, as the load test wants; the chaos campaign keeps re-reading)."""
        await self._reload(topic)

    async def _roll_over(self, topic: TopicState) -> None:
        """Add `batch` ledgers and write the list. On failure the local list forgets them
        (their znodes stay unlisted, as a broker crash would leave them)."""
        listed = len(topic.info.ledgerInfo)
        try:
            # Ids and list positions are taken in order before the first await of each.
            await asyncio.gather(
                *(
                    self._add_ledger(
                        topic.ml_name,
                        topic.info,
                        offloaded=self.rng.random() < self.options.offloaded_share,
                    )
                    for _ in range(self.options.batch)
                )
            )
            topic.version = await self.mls.write(topic.ml_name, topic.info, version=topic.version)
        except BaseException:
            del topic.info.ledgerInfo[listed:]
            raise

    async def _trim(self, topic: TopicState) -> None:
        if self.brokers is not None:
            await self._trim_like_broker(topic, self.brokers)
        else:
            await self._trim_through_marker(topic)

    async def _trim_like_broker(self, topic: TopicState, brokers: BrokerTrimmer) -> None:
        """Write the list without all but the newest `keep` ledgers; the broker's deletes
        follow in the background."""
        written = await brokers.trim(topic.ml_name, topic.info, topic.version, self.options.keep)
        if written is not None:
            topic.info, topic.version = written

    def _unlinked_by_broker(self, ledger_id: int, tier: int, keys: tuple[str, ...]) -> None:
        self.on_marked(Marked(ledger_id, tier, time.monotonic(), keys))

    async def _trim_through_marker(self, topic: TopicState) -> None:
        """Mark every ledger but the newest `keep`; adopt the version the marker returns."""
        assert self.stub is not None, "checked at construction"
        listed = [entry.ledgerId for entry in topic.info.ledgerInfo]
        if len(listed) <= self.options.keep:
            return
        request = _mk.MarkLedgersRequest(
            component=_pd.MANAGED_LEDGER,
            managed_ledger_name=topic.ml_name,
            ledger_ids=listed[: -self.options.keep],
            write_mode=_mk.MARKER_WRITES,
            expected_version=topic.version,
            source=_pd.BROKER,
        )
        called = time.monotonic()
        with rpc_errors("marker"):
            response: _mk.MarkLedgersResponse = await self.stub.MarkLedgers(request, timeout=60)
        self.stats.mark_seconds.append(time.monotonic() - called)
        self.stats.mark_calls += 1
        self.stats.not_marked += len(response.not_marked)
        now = time.monotonic()
        offloads = {e.ledgerId: e.offloadContext for e in topic.info.ledgerInfo}
        for marked in response.marked:
            context = offloads[marked.ledger_id]
            keys = object_keys(marked.ledger_id, context) if context.HasField("uidMsb") else ()
            for tier in marked.tiers:
                tier_keys = keys if tier == _pd.OFFLOAD_LEDGER else ()
                self.on_marked(Marked(marked.ledger_id, tier, now, tier_keys))
        self.stats.marked += len(response.marked)
        if response.written:
            gone = {m.ledger_id for m in response.marked}
            kept = [e for e in topic.info.ledgerInfo if e.ledgerId not in gone]
            del topic.info.ledgerInfo[:]
            topic.info.ledgerInfo.extend(kept)
            topic.version = response.new_version
        elif response.marked:
            await self._reload(topic)

    async def _reload(self, topic: TopicState) -> None:
        """Adopt what the znode holds after a failure (as a broker re-reads after a fence)."""
        self.stats.conflicts += 1
        before = {e.ledgerId: e.offloadContext for e in topic.info.ledgerInfo}
        record = await self.mls.read(topic.ml_name)
        topic.info, topic.version = record.value, record.version
        # Only the marker (or in broker-style runs, the broker's own write) removes ledgers
        # from the list: whatever left it while the answer was lost was unlinked, and must be
        # tracked to its deletion like any other.
        now = time.monotonic()
        after = {e.ledgerId: e.offloadContext for e in topic.info.ledgerInfo}
        for ledger_id in before.keys() - after.keys():
            context = before[ledger_id]
            if not context.bookkeeperDeleted:
                self.on_marked(Marked(ledger_id, _pd.LEDGER, now))
            if context.HasField("uidMsb"):
                keys = object_keys(ledger_id, context)
                self.on_marked(Marked(ledger_id, _pd.OFFLOAD_LEDGER, now, keys))
        # A broker-style write that landed unseen may also have flagged `bookkeeperDeleted`.
        for ledger_id in before.keys() & after.keys():
            if after[ledger_id].bookkeeperDeleted and not before[ledger_id].bookkeeperDeleted:
                self.on_marked(Marked(ledger_id, _pd.LEDGER, now))


def object_keys(ledger_id: int, context: _ml.OffloadContext) -> tuple[str, ...]:
    """The data and index object keys of a ledger's offloaded copy (its context has a uuid)."""
    uuid = uuid_from_bits(context.uidMsb, context.uidLsb)
    return data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id)


def _now_ms() -> int:
    return int(time.time() * 1000)
