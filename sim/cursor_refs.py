"""Ledgers referenced from cursor properties, outside any ML list, and their workloads.

- A compacted-topic ledger (`TwoPhaseCompactor`, all versions): its id is the LongProperty
  `CompactedTopicLedger` of the `__compaction` cursor's mark-delete properties; while that
  cursor is closed they sit in its znode (`ManagedCursorInfo.properties`, field 5), while it
  is active in its cursor ledger's last entry, which no one but the broker reads
  (`sim/compaction.py`). Its custom metadata: `application=pulsar`,
  `component=compacted-ledger`, `pulsar/compactedTopic`, `pulsar/compactedTo` (none before
  Pulsar 2.3).
- A delayed-delivery bucket snapshot ledger (PIP-195, 3.0+,
  `BookkeeperBucketSnapshotStorage`): a cursor string property
  `#pulsar.internal.delayed.bucket_<start>_<end>` = the ledger id in decimal
  (`ManagedCursorInfo.cursorProperties`, field 8), with `component=delayed-index-bucket`
  (`sim/buckets.py`).

Released Pulsar deletes these ledgers itself once their property has moved (never through
the marker), and that delete can fail: S1 counts every reference (the live value of an
active `__compaction` cursor too, `PropertyRefs.live`), L1 asks for what a znode write
visibly unlinked (the follower's to turn into a PDLI), and leaves the rest to the
reconciler: a ledger created and never referenced (a broker crash mid-compaction or
mid-seal), a compacted ledger that moved on while its cursor was active.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Protocol

from services.metadata.pulsar_formats import ManagedCursorInfo
from services.metadata.pulsar_names import cursor_path
from sim.state import LEDGER, Copy
from tombstone.v1 import pending_delete_pb2 as _pd

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Coroutine

    from services.marker.marking import MarkResult
    from sim.state import TopicState
    from sim.view import WorldView

COMPACTION_CURSOR = "__compaction"
COMPACTED_LEDGER = "CompactedTopicLedger"
BUCKET_PREFIX = "#pulsar.internal.delayed.bucket"
SHARE = 0.3
"""Of the topics, the share with a compacted ledger; independently, with a bucket snapshot."""
CRASH_SHARE = 0.15
"""Of the compactions and bucket seals, the share whose broker crashes between creating the
ledger and writing the property that references it (a ledger nothing ever referenced)."""


def property_refs(info: ManagedCursorInfo) -> set[int]:
    """The ledger ids a cursor znode names in its properties."""
    ids = {p.value for p in info.properties if p.name == COMPACTED_LEDGER}
    ids.update(int(p.value) for p in info.cursorProperties if p.name.startswith(BUCKET_PREFIX))
    return ids


def topic_name(t: TopicState) -> str:
    tenant, namespace, _, local = t.ml.split("/")
    return f"persistent://{tenant}/{namespace}/{local}"


class Workload(Protocol):
    """A compaction or bucket workload (`sim.compaction.Compaction`, `sim.buckets.Buckets`)."""

    def plant(self) -> None: ...

    async def run(self) -> None: ...


class CompactionFactory(Protocol):
    def __call__(self, refs: PropertyRefs, t: TopicState, *, legacy: bool) -> Workload: ...


class BucketsFactory(Protocol):
    def __call__(self, refs: PropertyRefs, t: TopicState) -> Workload: ...


class PropertyRefs:
    """The compaction and bucket workloads of a run, and what they tell the checks.

    Drawn from a generator of their own (`seed * 31 + 7`, as the static plants before them),
    so the brokers' draws stay as they were."""

    def __init__(self, world: WorldView, seed: int) -> None:
        self.world = world
        self.rng = random.Random(seed * 31 + 7)
        self.live: dict[str, frozenset[Copy]] = {}
        """Cursor path -> the references it holds outside its znode: the `CompactedTopicLedger`
        of an active `__compaction` cursor, written in its cursor ledger."""
        self.topic_of: dict[str, TopicState] = {}
        """Each cursor path the workloads write -> its topic."""
        self.own_write = False
        """Set while a workload writes a cursor znode (its deletes are its own business)."""
        self.workloads: list[Workload] = []
        self.pending: list[asyncio.Task[None]] = []
        """The brokers' deletes of dropped bucket snapshots, still running."""

    def setup(
        self, topics: list[TopicState], compaction: CompactionFactory, buckets: BucketsFactory
    ) -> None:
        """Compacted ledgers and bucket snapshots for a drawn share of `topics`, each id put
        in `world.property_ledgers`, and the workloads that move them during the run. The
        workloads are passed in (`sim.compaction`, `sim.buckets`): they import this module."""
        for t in topics:
            if self.rng.random() < SHARE:
                workload = compaction(self, t, legacy=self.rng.random() < 0.1)
                workload.plant()
                self.workloads.append(workload)
            if self.rng.random() < SHARE:
                workload = buckets(self, t)
                workload.plant()
                self.workloads.append(workload)

    def tasks(self) -> list[asyncio.Task[None]]:
        import asyncio

        runs: list[Coroutine[Any, Any, None]] = [w.run() for w in self.workloads]
        return [asyncio.create_task(run) for run in runs]

    def referenced_now(self) -> list[tuple[TopicState, str, int, int]]:
        """(topic, cursor, ledger id, znode version) for each property reference a cursor
        znode the workloads write holds now (an active `__compaction` cursor's stale value
        excepted)."""
        from services.metadata.pulsar_formats import decode_cursor_info

        out: list[tuple[TopicState, str, int, int]] = []
        for path, t in self.topic_of.items():
            node = self.world.zk.nodes.get(path)
            if node is None:
                continue
            info = decode_cursor_info(node.data, path=path)
            if path.endswith("/" + COMPACTION_CURSOR) and info.cursorsLedgerId >= 0:
                continue
            cursor = path.rsplit("/", 1)[1]
            out.extend((t, cursor, i, node.version) for i in sorted(property_refs(info)))
        return out

    async def mark(
        self, t: TopicState, component: int, cursor: str, ledger_ids: tuple[int, ...], **kw: Any
    ) -> MarkResult | None:
        """A PIP-186 broker's MarkLedgers for ledgers a cursor property names (`kw`: the
        request's `caller_writes`, `expected_version`); None when the call failed."""
        from services.core.errors import TombstoneError
        from services.marker.owners import resolve_owner
        from services.marker.planning import MarkRequest

        world = self.world
        owner = resolve_owner(
            component, topic_name="", ml_name=t.ml, cursor_name=cursor, schema_id=""
        )
        world.requests += 1
        request = MarkRequest(
            owner=owner, ledger_ids=ledger_ids, request_id=f"req-{world.requests}", **kw
        )
        kind = _pd.LedgerComponent.Name(component)  # type: ignore[arg-type]
        try:
            result = await self.rng.choice(world.markers).mark(request)
        except TombstoneError as exc:
            world.sched.log(
                f"broker-{t.broker} {kind} {list(ledger_ids)} failed: {type(exc).__name__}"
            )
            return None
        marked = [i for i, _ in result.marked]
        written = "written" if result.written else "not written"
        world.sched.log(f"broker-{t.broker} {kind} {list(ledger_ids)}: marked {marked}, {written}")
        return result

    def register(self, path: str, t: TopicState) -> None:
        """A cursor znode the workloads write: tracked for S1 and L1 (`world.owners`). The
        `__compaction` cursor's ledger is switched and deleted by released Pulsar's code
        whatever the topic's broker (its unlinks are the follower's to see)."""
        self.topic_of[path] = t
        self.world.owners.setdefault(path, frozenset())
        if path.endswith("/" + COMPACTION_CURSOR):
            self.world.unmodified_paths.add(path)

    def write(self, path: str, info: ManagedCursorInfo) -> bool:
        """The broker's write of a cursor znode at the version it reads now (no await between
        the read and the write); False when the cursor is gone."""
        zk, data = self.world.zk, self.world.cluster.cursor_bytes(info)
        node = zk.nodes.get(path)
        self.own_write = True
        try:
            if node is None:
                zk.create(path, data)
            else:
                zk.set(path, data, version=node.version)
        finally:
            self.own_write = False
        return True

    def dropped(self, path: str, ledger_ids: set[int]) -> None:
        """A cursor znode deleted by something else than the workloads (an unsubscribe, a
        topic deletion) took these property references with it. For bucket snapshots the
        broker deletes them itself (`BucketDelayedDeliveryTracker.clear`, failing a drawn
        share of the time); a compacted ledger is left (apache/pulsar #21745)."""
        t = self.topic_of.get(path)
        if t is None or path.endswith("/" + COMPACTION_CURSOR):
            return
        import asyncio

        for ledger_id in sorted(ledger_ids):
            self.world.sched.log(f"broker-{t.broker} deletes bucket snapshot [{ledger_id}]")
            self.pending.append(
                asyncio.create_task(self.world.unmodified.deletes_ledger(t, ledger_id))
            )

    async def settle(self) -> None:
        """Wait for the brokers' deletes still running (before the run heals)."""
        import asyncio

        while self.pending:
            batch, self.pending = self.pending, []
            await asyncio.gather(*batch)


def subscription_path(t: TopicState) -> str:
    return cursor_path(t.ml, t.cursor)


def live_copy(ledger_id: int) -> Copy:
    return (ledger_id, LEDGER, "")
