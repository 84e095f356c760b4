"""One simulated run: the cluster, the services, the workload, the faults and the checks."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from services.core.config import OffloadDefaults
from services.core.errors import TombstoneError
from services.marker.follower.index import ledger_ids
from services.marker.owners import LedgerRef, resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.namespaces import (
    encode_policies,
    namespace_of_ml,
    namespace_of_schema,
    policies_path,
)
from services.metadata.offload import data_object_key, index_object_key, offload_uuid
from services.metadata.pulsar_formats import (
    ManagedCursorInfo,
    ManagedLedgerInfo,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
)
from services.metadata.pulsar_names import cursor_path, managed_ledger_path
from services.systopic.dead_letter import CLIENT_ORIGIN_PROPERTY, PROP_REASON_CODE
from services.systopic.retry import PROP_ORIGIN_MESSAGE_ID
from sim.buckets import Buckets
from sim.compaction import Compaction
from sim.cursor_refs import COMPACTION_CURSOR, PropertyRefs, property_refs
from sim.follower import known
from sim.intruder import Intruder
from sim.namespaces import DeletedNamespace
from sim.neighbour import (
    GEO_NAMESPACE,
    GEO_SHARE,
    SHARED_NAMESPACE,
    NeighbourCluster,
)
from sim.pulsar import (
    BUCKET,
    CLUSTER,
    DRIVER,
    ENCODINGS,
    LAYOUTS,
    NEIGHBOUR,
    OFFLOADER_ERAS,
    Cluster,
    cursor_meta,
    data_meta,
    foreign_meta,
    set_offload,
)
from sim.s3 import S3
from sim.scheduler import Scheduler
from sim.schemas import Schemas, is_schema_path, locator_ledgers
from sim.services import (
    MAX_RETRIES,
    DeleterService,
    Durable,
    MarkerService,
    Registry,
    VerifierService,
)
from sim.shadows import (
    DELETE_SHARE,
    LATE_SHARE,
    SHADOW_SHARE,
    Shadow,
    create_later,
    create_shadow,
)
from sim.state import CHAOS_SECONDS, LEDGER, OFFLOAD, Copy, TopicState
from sim.topic import ACKED, Entry, Topic
from sim.unmodified import UnmodifiedBrokers
from sim.zk import ZooKeeper
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf

QUIESCE_SECONDS = 900.0
MAX_MESSAGES = 5000
"""Messages stored on the three topics beyond which a run is stopped as an L2 violation."""
REUSE_SHARE = 0.2
"""Of the verifier's DELETE verdicts on BookKeeper copies, the share whose id is used again."""
UNMODIFIED_SHARE = 0.5
"""Of the topics, the share whose broker is unmodified (no marker call: the follower's)."""
FRESH_SHARE = 0.3
"""Of the runs, the share that starts as a fresh deployment without `tombstone setup`: the
system topic has no subscription and no retention, and the markers start before any deleter
(which creates the subscription when it subscribes, up to `FRESH_DELETER_DELAY` later)."""
FRESH_DELETER_DELAY = 15.0


class Service(Protocol):
    name: str
    up: bool

    def start(self) -> None: ...

    def crash(self) -> None: ...


@dataclass
class Violation:
    invariant: str
    detail: str


class World:
    def __init__(self, seed: int, *, allowed_buckets: frozenset[str] = frozenset({BUCKET})):
        self.sched = sched = Scheduler(seed)
        self.reuse_rng = random.Random(seed * 7919 + 17)
        self.zk = ZooKeeper(sched)
        self.s3 = S3(sched)
        self.neighbour = NeighbourCluster(self, seed)
        self.dlq = Topic("dlq", sched, partitions=1)
        self.retry = Topic("retry", sched, partitions=2, backstop=self.dlq)
        self.main = Topic("main", sched, partitions=3, backstop=self.dlq)
        self.registry = Registry()
        self.durable = Durable(
            sched,
            self.zk,
            self.s3,
            self.main,
            self.retry,
            self.dlq,
            self.registry,
            allowed_buckets,
            timedelta(seconds=sched.rng.choice([0.05, 0.5, 3.0])),
            sched.rng.choice([None, timedelta(seconds=0.5), timedelta(seconds=2)]),
            sched.rng.choice(["off", "optional", "required"]),
            sched.rng.random() < 0.5,
            checkpoint_interval=timedelta(seconds=sched.rng.choice([3.0, 10.0, 60.0])),
            # Without a default, what a 2.1 offloader wrote is UNSUPPORTED: dead-lettered.
            offload_defaults=OffloadDefaults(DRIVER, sched.rng.choice([BUCKET, None])),
            encoding=sched.rng.choice(ENCODINGS),
            shadow_scan_interval=timedelta(seconds=sched.rng.choice([10.0, 30.0, 300.0])),
            layout=sched.rng.choice(LAYOUTS),
            neighbour=self.neighbour.zk,
            neighbour_declared=self.neighbour.declared,
        )
        self.both_follow = sched.rng.random() < 0.5
        """marker-0 follows; marker-1 too in half the runs (one leads, one stands by)."""
        self._delete_failure_share = sched.rng.choice([0.2, 0.5, 1.0])
        """Of an unmodified broker's own deletes, the share that fails (never retried)."""
        self.unmodified_unlinks: set[Copy] = set()
        """Copies an unmodified broker's write unlinked (only the follower sends their PDLIs)."""
        self.unmodified_paths: set[str] = set()
        self.excluded: list[Copy] = []
        self.violations: list[Violation] = []
        self.owners: dict[str, frozenset[Copy]] = {}
        """Owner znode path -> the copies it references now."""
        self.ever: dict[Copy, str] = {}
        """Every copy ever referenced, with its owner path."""
        self.foreign_ledgers: set[int] = set()
        self.in_creation: list[tuple[TopicState, int]] = []
        """Ledgers created by a rollover and not listed yet."""
        self.gone_cursors: list[int] = []
        self.requests = 0
        self._violated: asyncio.Event | None = None
        self.retry.on_append = self._on_retry_copy
        self.chain: dict[str, int] = {}
        """Retry copies by message id: how many retries led to each."""
        self.zk.on_write = self._on_owner_write
        self.zk.on_delete = self._on_ledger_delete
        self.s3.on_delete = self._on_object_delete
        self.registry.on_failure = self._service_failed
        self.zk.on_request = self.check_znode_path
        self.s3.on_request = self._check_object_key
        self.seed = seed
        self.fresh = random.Random(seed * 389 + 11).random() < FRESH_SHARE
        if self.fresh:
            self.main.subscribed = self.main.retained = False
        self.property_ledgers: set[int] = set()
        """Ledgers referenced from cursor properties (compacted, bucket snapshots)."""
        self.props = PropertyRefs(self, seed)
        """The compaction and bucket-snapshot workloads (`sim/cursor_refs.py`)."""
        self.schemas = Schemas(self, seed)
        self.deleted_namespace = DeletedNamespace(self, seed)
        self.shadow_rng = random.Random(seed * 613 + 5)
        """Shadows created during the run (a generator of their own)."""
        self.shadows: list[Shadow] = []
        self.shadow_followers: list[asyncio.Task[None]] = []
        self.late_shadow_count = 0
        self.shadow_lists: dict[str, frozenset[Copy]] = {}
        """Each shadow topic's ML path -> the copies its copy of the source's list names."""
        self.late_shadows: list[asyncio.Task[None]] = []
        """Shadows being created during the run (`sim/shadows.py`)."""
        """Each topic's schema locator and version ledgers, and their workload."""

    # --- tracking references (for S1 and L1) ----------------------------------------------

    def _on_owner_write(self, path: str, data: bytes | None) -> None:
        if path in self.shadow_lists:
            listed: frozenset[Copy] = frozenset()
            if data is not None:
                listed = frozenset(_ml_copies(decode_managed_ledger_info(data, path=path)))
            self.shadow_lists[path] = listed
            return
        if path not in self.owners:
            return
        copies: set[Copy] = set()
        if data is not None and is_schema_path(path):
            locator = decode_schema_locator(data, path=path)
            copies.update((i, LEDGER, "") for i in locator_ledgers(locator))
        elif data is not None and path.count("/") == 5:  # /managed-ledgers/t/ns/persistent/x
            copies.update(_ml_copies(decode_managed_ledger_info(data, path=path)))
        elif data is not None:
            cursor = decode_cursor_info(data, path=path)
            if cursor.cursorsLedgerId >= 0:
                copies.add((cursor.cursorsLedgerId, LEDGER, ""))
            # Property references: S1 always, L1 once visibly unlinked (`sim/cursor_refs.py`).
            copies.update((i, LEDGER, "") for i in property_refs(cursor))
        self._property_unlinks(path, data, copies)
        if path in self.unmodified_paths:
            self.unmodified_unlinks.update(self.owners[path] - copies)
        self.owners[path] = frozenset(copies)
        for copy in sorted(copies):
            if copy[0] not in self.property_ledgers:
                self.ever.setdefault(copy, path)

    def _property_unlinks(self, path: str, data: bytes | None, copies: set[Copy]) -> None:
        """Property references a write of a cursor znode removed: visible unlinks (released
        Pulsar deletes the ledger itself, and when that fails only the follower's PDLI gets
        it deleted), so L1 asks for them. A value that left the znode while still live (an
        `__compaction` cursor becoming active) is no unlink; when the znode is deleted the
        live value goes with it."""
        if data is None:
            self.props.live.pop(path, None)
        live = self.props.live.get(path, frozenset())
        removed = {
            c for c in self.owners[path] - copies if c[0] in self.property_ledgers and c not in live
        }
        if not removed:
            return
        self.unmodified_unlinks.update(removed)
        for copy in sorted(removed):
            self.ever.setdefault(copy, path)
        if data is None and not self.props.own_write:
            self.props.dropped(path, {c[0] for c in removed})

    def referenced(self) -> set[Copy]:
        """Every copy an owner references now: its znode, and the live value of an active
        `__compaction` cursor (in its cursor ledger, which only the broker reads)."""
        out: set[Copy] = set()
        for path, copies in self.owners.items():
            live = self.props.live.get(path)
            if live is None:
                out.update(copies)
            else:  # what the znode still names of an older mark-delete is no reference
                out.update(c for c in copies if c[0] not in self.property_ledgers)
                out.update(live)
        return out

    def shadow_listed(self) -> set[Copy]:
        """Copies a shadow topic reads now (as its source would: not the BookKeeper copy of
        a ledger offloaded with `bookkeeperDeleted`). A deleter must not delete one; the
        source's unmodified broker deletes what it trims whatever a shadow lists (Pulsar's
        doing, not checked)."""
        return {c for copies in self.shadow_lists.values() for c in copies}

    def _on_ledger_delete(self, path: str, by: str) -> None:
        if not by.startswith("deleter"):
            return
        self.sched.log(f"{by} deletes {path}")
        ledger_id = self.cluster.ledger_id_of(path)
        if ledger_id is None:
            return
        if (ledger_id, LEDGER, "") in self.referenced():
            self.violation("S1", f"{by} deleted {path}, still referenced")
        if (ledger_id, LEDGER, "") in self.shadow_listed():
            self.violation("S1", f"{by} deleted {path}, listed by a shadow topic")
        if ledger_id in self.neighbour.referenced():
            self.violation("S1", f"{by} deleted {path}, referenced by cluster {NEIGHBOUR}")
        elif ledger_id in self.neighbour.ledgers:
            self.violation("S2", f"{by} deleted {path}, a ledger of cluster {NEIGHBOUR}")
        if ledger_id in self.foreign_ledgers:
            self.violation("S2", f"{by} deleted {path}, a ledger Pulsar did not create")

    def _on_object_delete(self, bucket: str, key: str, by: str) -> None:
        self.sched.log(f"{by} deletes s3://{bucket}/{key}")
        if bucket != BUCKET:
            self.violation("S2", f"{by} deleted s3://{bucket}/{key}, outside the allowed buckets")
            return
        for ledger_id, tier, uuid in self.referenced():
            if tier == OFFLOAD and key.startswith(f"{uuid}-ledger-{ledger_id}"):
                self.violation("S1", f"{by} deleted s3://{bucket}/{key}, still referenced")
        shadows = self.shadow_listed() if by.startswith("deleter") else set()
        for ledger_id, tier, uuid in shadows:
            if tier == OFFLOAD and key.startswith(f"{uuid}-ledger-{ledger_id}"):
                self.violation("S1", f"{by} deleted s3://{bucket}/{key}, listed by a shadow topic")

    def _service_failed(self, service: str, error: BaseException) -> None:
        """Nothing crashes a service: a background loop (the deleter's pool, the follower, the
        verifier's shadow index) that ends with an error would stop the real process."""
        self.violation("crash", f"{service}'s loop ended: {type(error).__name__}: {error}")

    def check_znode_path(self, path: str, by: str) -> None:
        """Names at the port (docs/design.md §4.6): no path a service sends ZooKeeper has an
        empty, `.` or `..` segment. ZooKeeper does not resolve them: Debian's server answers a
        read of `/a/./b` with "no such znode" (`tests/sim/test_zk_differential.py`), so an
        owner named that way would read as absent, whatever the owner it aliases holds."""
        segments = path.split("/")[1:] if path != "/" else []
        bad = next((seg for seg in segments if seg in ("", ".", "..")), None)
        if bad is not None:
            self.violation("names", f"{by} sent ZooKeeper {path!r} (segment {bad!r})")

    def _check_object_key(self, key: str, by: str) -> None:
        """Names at the port, for S3: no key or prefix a service sends has a `.` or `..`
        segment (an S3 key is an opaque string, but an offload base or a filesystem path
        built from it would resolve them)."""
        bad = next((seg for seg in key.split("/") if seg in (".", "..")), None)
        if bad is not None:
            self.violation("names", f"{by} sent S3 key {key!r} (segment {bad!r})")

    def _on_retry_copy(self, entry: Entry) -> None:
        """L2, nothing retried forever: a chain of retry copies (each naming the message it
        copies) never grows longer than the deleter's retry budget."""
        depth = self.chain.get(entry.properties.get(PROP_ORIGIN_MESSAGE_ID, ""), 0) + 1
        self.chain[entry.message_id] = depth
        if depth == MAX_RETRIES + 1:
            self.violation("L2", f"key={entry.key} retried {depth} times (budget {MAX_RETRIES})")

    def violation(self, invariant: str, detail: str) -> None:
        self.sched.log(f"VIOLATION {invariant}: {detail}")
        self.violations.append(Violation(invariant, detail))
        if self._violated is not None:
            self._violated.set()

    # --- the cluster -----------------------------------------------------------------------

    def setup(self) -> None:
        rng = self.sched.rng
        self.cluster = Cluster(self.zk, self.s3, self.durable.encoding, self.durable.layout)
        self.unmodified = UnmodifiedBrokers(
            self.sched, self.cluster, self.s3, self._delete_failure_share
        )
        self.intruder = Intruder(self)
        self.topics: list[TopicState] = []
        self._create_namespaces()
        for i in range(rng.randint(1, 3)):
            unmodified = rng.random() < UNMODIFIED_SHARE
            geo = self.neighbour.rng.random() < GEO_SHARE
            namespace = GEO_NAMESPACE if geo else SHARED_NAMESPACE
            t = TopicState(f"{namespace}/persistent/t{i}", "sub", i % 2, unmodified)
            self.create_topic(t, rng)
            self.topics.append(t)
        for t in self.topics:
            if rng.random() < SHADOW_SHARE:
                create_shadow(self, t)
        self.schemas.setup(self.topics)
        self.props.setup(self.topics, Compaction, Buckets)
        for _ in range(rng.randint(0, 2)):
            self.foreign_ledgers.add(self.cluster.new_ledger(foreign_meta(), closed=True))
        geo_topics = [t.ml for t in self.topics if namespace_of_ml(t.ml) == GEO_NAMESPACE]
        self.neighbour.setup(geo_topics)
        self.deleted_namespace.setup()
        sharing = "declared" if self.neighbour.declared else "undeclared"
        self.sched.log(
            f"{NEIGHBOUR} shares the ledgers root ({sharing}); geo topics {geo_topics}; "
            f"signing {self.durable.signing}"
        )
        self.markers = [
            MarkerService(self.durable, f"marker-{i}", follow=i == 0 or self.both_follow)
            for i in range(2)
        ]
        self.verifier = VerifierService(self.durable)
        self.durable.verifier = self.verifier
        self.verifier.on_verdict = self._reuse_after_verdict
        # A topic no broker of the workload touches: only `_reuse_after_verdict` writes it.
        self.reuse_topic = TopicState("public/default/persistent/reused", "sub", broker=0)
        self.owners[managed_ledger_path(self.reuse_topic.ml)] = frozenset()
        self.cluster.create_topic(self.reuse_topic.ml, self.reuse_topic.cursor)
        self.deleters = [
            DeleterService(self.durable, f"deleter-{i}", self.verifier, start=not self.fresh)
            for i in range(2)
        ]

    def create_topic(self, t: TopicState, rng: random.Random) -> None:
        """A topic with 2-5 closed ledgers and its current one OPEN, and one subscription
        with its cursor ledger OPEN; its owners tracked for S1 and L1."""
        self.owners[managed_ledger_path(t.ml)] = frozenset()
        self.owners[cursor_path(t.ml, t.cursor)] = frozenset()
        if t.unmodified:
            self.unmodified_paths.update(self.owners_of(t))
        self.cluster.create_topic(t.ml, t.cursor)
        info, version = self.cluster.ml(t.ml)
        for _ in range(rng.randint(2, 5)):
            legacy = rng.random() < 0.1  # created before Pulsar 2.2: no custom metadata
            ledger_id = self.cluster.new_ledger({} if legacy else data_meta(t.ml), closed=True)
            info.ledgerInfo.add(ledgerId=ledger_id, entries=10, size=100, timestamp=0)
        last = self.cluster.new_ledger(data_meta(t.ml), closed=False)
        info.ledgerInfo.add(ledgerId=last, entries=0, size=0, timestamp=0)
        self.cluster.write_ml(t.ml, info, version)
        cursor_ledger = self.cluster.new_ledger(cursor_meta(t.ml, t.cursor), closed=False)
        self.cluster.write_cursor(t.ml, t.cursor, cursor_ledger)

    def _create_namespaces(self) -> None:
        """Pulsar's namespace policies in our store (ours is also the configuration store),
        written before any topic of the namespace exists: `public/default`, the namespace
        geo-replicated with the neighbour, and the V1 namespaces (`tenant/cluster/ns`) of the
        V1 schema ids (`sim/schemas.py`)."""
        tenant = b'{"adminRoles":[],"allowedClusters":["%s","%s"]}' % (
            CLUSTER.encode(),
            NEIGHBOUR.encode(),
        )
        self.zk.create("/admin/policies/public", tenant, make_parents=True)
        for namespace, clusters in (
            (SHARED_NAMESPACE, [CLUSTER]),
            (GEO_NAMESPACE, [CLUSTER, NEIGHBOUR]),
        ):
            self.zk.create(policies_path(namespace), encode_policies(clusters))
            tenant_name, local = namespace.split("/")
            v1 = namespace_of_schema(f"{tenant_name}/{CLUSTER}/{local}/x")
            self.zk.create(policies_path(v1), encode_policies([CLUSTER]), make_parents=True)

    @staticmethod
    def owners_of(t: TopicState) -> tuple[str, str]:
        return managed_ledger_path(t.ml), cursor_path(t.ml, t.cursor)

    # --- the workload: brokers -------------------------------------------------------------

    async def broker_topic(self, t: TopicState) -> None:
        rng = self.sched.rng
        for _ in range(rng.randint(3, 8)):
            await asyncio.sleep(rng.uniform(0.0, CHAOS_SECONDS / 6))
            action = rng.choice(
                [
                    "rollover",
                    "trim",
                    "trim",
                    "offload",
                    "cursor",
                    "unsubscribe",
                    "reconcile",
                    "delete_topic",
                ]
            )
            async with t.lock:
                self.sched.log(f"broker-{t.broker} {action} {t.ml}")
                before = list(self.cluster.ml_now(t.ml).ledgerInfo)
                if t.unmodified and hasattr(self.unmodified, action):
                    await getattr(self.unmodified, action)(t)
                else:
                    await getattr(self, action)(t)
            if action == "trim" and self.shadow_rng.random() < LATE_SHARE:
                self.late_shadows.append(asyncio.create_task(create_later(self, t, before)))

    async def _shadow_at_random(self, t: TopicState) -> None:
        """A shadow of `t` created at a random moment of the run (from its list then)."""
        if self.shadow_rng.random() >= LATE_SHARE:
            return
        await asyncio.sleep(self.shadow_rng.uniform(0.0, CHAOS_SECONDS))
        await create_later(self, t, list(self.cluster.ml_now(t.ml).ledgerInfo))

    async def rollover(self, t: TopicState) -> None:
        """`ManagedLedgerImpl.createLedgerAfterClosed`: the new ledger exists (OPEN) a while
        before the ML list names it; a reconciler scan may see it unreferenced meanwhile."""
        info, _ = self.cluster.ml(t.ml)
        if info.ledgerInfo:
            self.cluster.close_ledger(info.ledgerInfo[-1].ledgerId, data_meta(t.ml))
        ledger_id = self.cluster.new_ledger(data_meta(t.ml), closed=False)
        self.in_creation.append((t, ledger_id))
        await asyncio.sleep(self.sched.rng.uniform(0.0, 2.0))
        self.in_creation.remove((t, ledger_id))
        info, version = self.cluster.ml(t.ml)
        info.ledgerInfo.add(ledgerId=ledger_id, entries=0, size=0, timestamp=self.sched.now_ms())
        self.cluster.write_ml(t.ml, info, version)

    async def offload(self, t: TopicState) -> None:
        rng = self.sched.rng
        info, version = self.cluster.ml(t.ml)
        candidates = [e for e in info.ledgerInfo[:-1] if not e.HasField("offloadContext")]
        if not candidates:
            return
        entry = rng.choice(candidates)
        uuid = self.cluster.new_uuid()
        # Offloads of a cluster upgraded from older Pulsar: a 2.1 context names no bucket (the
        # operator's default applies), objects before 2.10 name no owner (the index may).
        era = rng.choice(OFFLOADER_ERAS)
        self.cluster.upload(BUCKET, uuid, entry.ledgerId, t.ml, era)
        complete = rng.random() < 0.8  # else the upload was interrupted (objects stay)
        bk_deleted = complete and rng.random() < 0.5
        set_offload(entry, uuid, complete=complete, bk_deleted=bk_deleted, bucket=BUCKET, era=era)
        self.cluster.write_ml(t.ml, info, version)
        if bk_deleted and t.unmodified:
            await self.unmodified.deletes_ledger(t, entry.ledgerId)
        elif bk_deleted:
            # Pulsar deletes the BookKeeper copy itself once `bookkeeperDeleted` is written.
            path = self.cluster.ledger_path(entry.ledgerId)
            if self.zk.stat(path) is not None:
                self.zk.delete(path, version=-1, by="pulsar")

    async def trim(self, t: TopicState) -> None:
        rng = self.sched.rng
        info, version = self.cluster.ml(t.ml)
        listed = [e.ledgerId for e in info.ledgerInfo[:-1]]
        if not listed:
            return
        ledger_ids = tuple(listed[: rng.randint(1, min(3, len(listed)))])
        caller_writes = rng.random() < 0.3
        owner = resolve_owner(
            _pd.MANAGED_LEDGER, topic_name="", ml_name=t.ml, cursor_name="", schema_id=""
        )
        self.requests += 1
        request = MarkRequest(
            owner=owner,
            ledger_ids=ledger_ids,
            caller_writes=caller_writes,
            expected_version=version if caller_writes or rng.random() < 0.5 else None,
            request_id=f"req-{self.requests}",
        )
        marker = rng.choice(self.markers)
        try:
            result = await marker.mark(request)
        except TombstoneError as exc:
            self.sched.log(f"broker-{t.broker} trim {ledger_ids} failed: {type(exc).__name__}")
            return
        marked = [i for i, _ in result.marked]
        self.sched.log(f"broker-{t.broker} trim {ledger_ids}: marked {marked}")
        if caller_writes and marked:
            if rng.random() < 0.1:
                self.sched.log(f"broker-{t.broker} crashed before its own write")
                return
            info, now = self.cluster.ml(t.ml)
            if now != result.read_version:
                return
            gone = set(marked)
            keep = [e for e in info.ledgerInfo if e.ledgerId not in gone]
            del info.ledgerInfo[:]
            info.ledgerInfo.extend(keep)
            self.cluster.write_ml(t.ml, info, now)

    async def cursor(self, t: TopicState) -> None:
        """`ManagedCursorImpl.switchToNewLedger`: a new OPEN ledger; the old one unlinked."""
        old = self.cluster.cursor_ledger(t.ml, t.cursor)
        new = self.cluster.new_ledger(cursor_meta(t.ml, t.cursor), closed=False)
        if old is None or old < 0:
            self.cluster.write_cursor(t.ml, t.cursor, new)
            return
        owner = resolve_owner(
            _pd.MANAGED_CURSOR, topic_name="", ml_name=t.ml, cursor_name=t.cursor, schema_id=""
        )
        self.requests += 1
        request = MarkRequest(
            owner=owner,
            ledger_ids=(old,),
            new_cursor_ledger_id=new,
            request_id=f"req-{self.requests}",
        )
        try:
            result = await self.sched.rng.choice(self.markers).mark(request)
        except TombstoneError as exc:
            self.sched.log(f"cursor switch {old}->{new} failed: {type(exc).__name__}")
            return
        self.sched.log(f"cursor switch {old}->{new}: marked {[i for i, _ in result.marked]}")

    async def unsubscribe(self, t: TopicState, *, recreate: bool = True) -> bool:
        """Unsubscribe (`ManagedCursorImpl.asyncDeleteCursor`): the cursor ledger is unlinked
        through the marker, then the broker removes the cursor znode; the ledger is OPEN."""
        old = self.cluster.cursor_ledger(t.ml, t.cursor)
        if old is None or old < 0:
            return True  # no cursor ledger to unlink
        owner = resolve_owner(
            _pd.MANAGED_CURSOR, topic_name="", ml_name=t.ml, cursor_name=t.cursor, schema_id=""
        )
        self.requests += 1
        request = MarkRequest(owner=owner, ledger_ids=(old,), request_id=f"req-{self.requests}")
        try:
            result = await self.sched.rng.choice(self.markers).mark(request)
        except TombstoneError as exc:
            self.sched.log(f"unsubscribe {t.cursor} [{old}] failed: {type(exc).__name__}")
            return False
        self.sched.log(
            f"unsubscribe {t.cursor}: cursor ledger [{old}] marked {[i for i, _ in result.marked]}"
        )
        if not (result.marked and result.written):
            return False
        path = cursor_path(t.ml, t.cursor)
        stat = self.zk.stat(path)
        if stat is not None:
            self.zk.delete(path, version=stat.version, by="pulsar")
        if recreate:
            # A new subscription with the same name comes back later with a fresh ledger.
            self.cluster.zk.create(
                path, self.cluster.cursor_bytes(ManagedCursorInfo(cursorsLedgerId=-1))
            )
        return True

    async def delete_topic(self, t: TopicState, *, recreate: bool = True) -> bool:
        """Topic deletion (`ManagedLedgerImpl.asyncDelete`): every ledger unlinked through the
        marker, then the broker removes the cursor and ML znodes; the topic is created again
        under the same name (new znodes at version 0, new ledgers) unless its namespace is
        being deleted. Whether the topic was deleted."""
        if not await self.unsubscribe(t, recreate=False):
            return False  # the cursor ledger is still referenced: Pulsar does not go on
        info, _ = self.cluster.ml(t.ml)
        ledger_ids = tuple(e.ledgerId for e in info.ledgerInfo)
        if ledger_ids:
            owner = resolve_owner(
                _pd.MANAGED_LEDGER, topic_name="", ml_name=t.ml, cursor_name="", schema_id=""
            )
            self.requests += 1
            request = MarkRequest(
                owner=owner, ledger_ids=ledger_ids, request_id=f"req-{self.requests}"
            )
            try:
                result = await self.sched.rng.choice(self.markers).mark(request)
            except TombstoneError as exc:
                self.sched.log(
                    f"delete topic {t.ml} {list(ledger_ids)} failed: {type(exc).__name__}"
                )
                return False
            marked = [i for i, _ in result.marked]
            self.sched.log(f"delete topic {t.ml} {list(ledger_ids)}: marked {marked}")
            if len(result.marked) != len(ledger_ids) or not result.written:
                return False
        self.cluster.delete_other_cursors(t.ml, t.cursor)
        for path in (cursor_path(t.ml, t.cursor), managed_ledger_path(t.ml)):
            stat = self.zk.stat(path)
            if stat is not None:
                self.zk.delete(path, version=stat.version, by="pulsar")
        self.sched.log(f"topic {t.ml} deleted" + ("; created again" if recreate else ""))
        if recreate:
            self.cluster.recreate_topic(t.ml, t.cursor, self.sched.now_ms())
        return True

    def _reuse_after_verdict(self, pdli: _pd.PendingDeleteLedgerInfo, decision: int) -> None:
        """A ledger id used again, at the worst moment: right after the verifier decided to
        delete it, a BookKeeper client deletes the ledger itself, creates a ledger under the
        same id (`BookKeeper.createLedgerAdv` with an application-chosen id) and a topic of
        its own lists it. The deleter's conditional delete at the version it verified is what
        keeps it from deleting the new ledger. The new znode is taken one version past the
        old one's (a version both had would defeat the guard: the limit docs/simulation.md
        describes; no code path of Pulsar re-creates an id). Drawn from a generator of its
        own, so the rest of the run's draws stay as they were."""
        if pdli.ledger_type != _pd.LEDGER or decision != _vf.DELETE:
            return
        if pdli.ledger_id in self.neighbour.ledgers:
            return  # a DELETE of the neighbour's ledger is a violation already
        if (pdli.ledger_id, LEDGER, "") in self.unmodified_unlinks:
            # An unmodified broker deletes what it unlinked by id, at any version, whenever
            # its delete runs: an id used again meanwhile would be lost to Pulsar, not to
            # Tombstone. The reuse is staged only where Tombstone alone deletes.
            return
        if self.reuse_rng.random() >= REUSE_SHARE:
            return
        ledger_id = pdli.ledger_id
        path = self.cluster.ledger_path(ledger_id)
        stat = self.zk.stat(path)
        if stat is None or ledger_id not in self.cluster.data_ledgers:
            return
        t = self.reuse_topic
        info, version = self.cluster.ml(t.ml)
        # No await here: the id is deleted, created again and listed at one instant.
        self.zk.delete(path, version=-1, by="bookkeeper-client")
        self.cluster.recreate_ledger(ledger_id, data_meta(t.ml), stat.version + 1)
        info.ledgerInfo.add(ledgerId=ledger_id, entries=1, size=10, timestamp=self.sched.now_ms())
        self.cluster.write_ml(t.ml, info, version)
        self.sched.log(
            f"ledger id {ledger_id} created again (version {stat.version + 1}), listed by {t.ml}"
        )

    async def reconcile(self, t: TopicState) -> None:
        """A reconciler submission (`services.scan.submit.send`): ledgers of this topic that a scan
        found unreferenced, some of them only in creation (a rollover not listed yet)."""
        rng = self.sched.rng
        # What a scan finds: the topic's data ledgers no owner lists, in creation or orphaned.
        referenced = {c[0] for c in self.referenced()}
        candidates = [
            i
            for i, ml in sorted(self.cluster.data_ledgers.items())
            if ml == t.ml and i not in referenced
        ]
        if not candidates:
            return
        chosen = tuple(sorted(set(rng.sample(candidates, min(2, len(candidates))))))
        request = self.reconciler_request(t.ml, chosen)
        try:
            result = await rng.choice(self.markers).mark(request)
        except TombstoneError as exc:
            self.sched.log(f"reconciler {chosen} failed: {type(exc).__name__}")
            return
        self.sched.log(f"reconciler {chosen}: sent {[i for i, _ in result.marked]}")

    def reconciler_request(self, ml: str, ledger_ids: Iterable[int]) -> MarkRequest:
        """A reconciler's MarkLedgers request for `ledger_ids` of `ml`, as a scan submits it."""
        owner = resolve_owner(
            _pd.MANAGED_LEDGER, topic_name="", ml_name=ml, cursor_name="", schema_id=""
        )
        self.requests += 1
        return MarkRequest(
            owner=owner,
            ledger_ids=(),
            source=_pd.RECONCILER,
            request_id=f"req-{self.requests}",
            reconciler_ledgers=tuple(LedgerRef(i) for i in sorted(ledger_ids)),
        )

    # --- faults: crashes and restarts ------------------------------------------------------

    async def chaos(self) -> None:
        rng = self.sched.rng
        services = self.services()
        while self._faulting():
            await asyncio.sleep(rng.uniform(0.5, 8.0))
            if not self._faulting():
                return
            victim = rng.choice(services)
            if victim.up:
                self.sched.log(f"crash {victim.name}")
                victim.crash()
                await asyncio.sleep(rng.uniform(0.0, 3.0))
                self.sched.log(f"restart {victim.name}")
                victim.start()

    async def _deleters_arrive(self) -> None:
        """A fresh deployment: the deleters start a while after the markers."""
        self.sched.log("fresh deployment: no subscription, no retention; deleters not started")
        for deleter in self.deleters:
            await asyncio.sleep(self.sched.rng.uniform(0.0, FRESH_DELETER_DELAY))
            if not deleter.up:
                self.sched.log(f"start {deleter.name}")
                deleter.start()

    def _faulting(self) -> bool:
        return self.sched.faults_on

    def services(self) -> list[Service]:
        return [*self.markers, self.verifier, *self.deleters]

    # --- the run -----------------------------------------------------------------------------

    async def run(self) -> None:
        """The run, stopped early (an L2 violation) when its work grows without bound."""
        self._violated = asyncio.Event()
        main = asyncio.create_task(self._run())
        watchdog = asyncio.create_task(self._watch_work())
        stop = asyncio.create_task(self._violated.wait())  # the first violation ends the run
        await asyncio.wait([main, watchdog, stop], return_when=asyncio.FIRST_COMPLETED)
        for task in (main, watchdog, stop):
            task.cancel()
        await asyncio.gather(main, watchdog, stop, return_exceptions=True)
        if not main.cancelled() and main.exception() is not None:
            raise main.exception()  # type: ignore[misc]

    async def _watch_work(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            stored = sum(len(t.entries()) for t in (self.main, self.retry, self.dlq))
            if stored > MAX_MESSAGES:
                self.violation("L2", f"{stored} messages stored: the work grows without bound")
                for service in self.services():
                    service.crash()
                return

    async def _run(self) -> None:
        self.setup()
        chaos = asyncio.create_task(self.chaos())
        work = [asyncio.create_task(self.broker_topic(t)) for t in self.topics]
        work.append(asyncio.create_task(self.intruder.attacker()))
        if self.fresh:
            work.append(asyncio.create_task(self._deleters_arrive()))
        # The shadows' brokers copy their sources' lists until the run ends.
        self.shadow_followers = [asyncio.create_task(s.follow_source()) for s in self.shadows]
        for shadow in list(self.shadows):
            if self.sched.rng.random() < DELETE_SHARE:
                work.append(asyncio.create_task(shadow.delete_later()))
        work.extend(self.schemas.tasks())
        work.extend(self.props.tasks())
        work.extend(self.neighbour.tasks())
        work.append(asyncio.create_task(self.deleted_namespace.run()))
        work.append(asyncio.create_task(self.intruder.neighbour_intruder()))
        work.extend(asyncio.create_task(self._shadow_at_random(t)) for t in self.topics)
        await asyncio.sleep(CHAOS_SECONDS)
        await asyncio.gather(*work)
        await asyncio.gather(*self.late_shadows)
        await self.props.settle()
        self.sched.faults_on = False
        self.sched.log("heal")
        await chaos
        for service in self.services():
            if not service.up:
                service.start()
        deadline = self.sched.now() + QUIESCE_SECONDS
        # Polling costs nothing on virtual time, and "drained" spans three topics.
        while self.sched.now() < deadline and not self.drained():  # noqa: ASYNC110
            await asyncio.sleep(5.0)
        self.sched.log("quiesced" if self.drained() else "not drained")
        self.check_end()
        for service in self.services():
            service.crash()

    def drained(self) -> bool:
        if self.main.unacked() or self.retry.unacked():
            return False
        if not self.followers():
            return True
        # One follower leads and has read every change (its PDLIs are on the topic).
        leader = self.leader()
        return leader is not None and leader.follower is not None and leader.follower.idle.is_set()

    def followers(self) -> list[MarkerService]:
        return [m for m in self.markers if m.follow]

    def leader(self) -> MarkerService | None:
        return next((m for m in self.markers if m.leads()), None)

    def check_end(self) -> None:
        for topic in (self.main, self.retry):
            left = topic.unacked()
            if left:
                counts = max(e.deliveries for e in left)
                self.violation(
                    "L2",
                    f"{topic.name}: {len(left)} messages not settled (max deliveries {counts})",
                )
        dead = self._dead_lettered()
        referenced = self.referenced()
        leader = self.leader()
        follower_knew: set[Copy] = set()
        if leader is not None and leader.follower is not None:
            follower_knew = known(leader.follower.index)
        for ledger_id, tier, uuid in sorted(referenced):
            if tier == LEDGER and self.zk.stat(self.cluster.ledger_path(ledger_id)) is None:
                self.violation("S1", f"ledger {ledger_id} is referenced and gone")
            if tier == OFFLOAD and data_object_key(uuid, ledger_id) not in self.s3.buckets[BUCKET]:
                self.violation(
                    "S1", f"offloaded copy {uuid} of ledger {ledger_id} is referenced and gone"
                )
        for ledger_id in sorted(self.neighbour.referenced()):
            if self.zk.stat(self.cluster.ledger_path(ledger_id)) is None:
                self.violation("S1", f"ledger {ledger_id} is referenced by {NEIGHBOUR} and gone")
        for copy in sorted(self.ever):
            if copy in referenced:
                continue
            ledger_id, tier, uuid = copy
            if tier == LEDGER:
                present = self.zk.stat(self.cluster.ledger_path(ledger_id)) is not None
            else:
                keys = (data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id))
                present = any(k in self.s3.buckets[BUCKET] for k in keys)
            if present and copy not in dead and self._reconcilers(copy, follower_knew):
                self.excluded.append(copy)
                self.sched.log(f"L1 excluded (the reconciler's): {tier} copy of ledger {ledger_id}")
            elif present and copy not in dead:
                self.violation(
                    "L1",
                    f"{tier} copy of ledger {ledger_id} {uuid} unlinked, present, not in the DLQ",
                )

    def _reconcilers(self, copy: Copy, follower_knew: set[Copy]) -> bool:
        """An unmodified broker's unlink the follower could not see, so left to the
        reconciler (docs/follower.md, "What only the reconciler can catch"): the leading
        follower's index, as built from its reads and the checkpoints it descends from, never
        held the copy (listed and unlinked between two reads, or while no follower ran and
        after the last checkpoint, or before the first start). `sim/follower.py` tracks it."""
        if copy in self.unmodified_unlinks and copy not in follower_knew:
            return True
        return self._compaction_hidden(copy)

    def _compaction_hidden(self, copy: Copy) -> bool:
        """A compacted ledger replaced while the leading follower did not look, its cursor
        active since: the follower carries the value its last read showed (a znode write of
        an active cursor may omit the live value), so it cannot tell the move happened until
        the cursor closes or goes. The reconciler's, like a move made while active."""
        path = self.ever.get(copy)
        leader = self.leader()
        if path is None or not path.endswith("/" + COMPACTION_CURSOR) or leader is None:
            return False
        node = self.zk.nodes.get(path)
        if node is None or decode_cursor_info(node.data, path=path).cursorsLedgerId < 0:
            return False
        entry = None if leader.follower is None else leader.follower.index.get(path)
        return entry is not None and copy[0] in ledger_ids(entry)

    def _dead_lettered(self) -> set[Copy]:
        from services.systopic.messages import decode_intent

        out: set[Copy] = set()
        for entry in self.dlq.entries():
            has_reason = PROP_REASON_CODE in entry.properties or (
                CLIENT_ORIGIN_PROPERTY in entry.properties
            )
            if not has_reason:
                continue
            try:
                pdli = decode_intent(entry.payload, entry.properties)
            except TombstoneError:
                continue
            if pdli.ledger_type == _pd.OFFLOAD_LEDGER:
                from services.metadata.offload import uuid_from_bits

                ctx = pdli.offload_context
                out.add((pdli.ledger_id, OFFLOAD, uuid_from_bits(ctx.uuid_msb, ctx.uuid_lsb)))
            else:
                out.add((pdli.ledger_id, LEDGER, ""))
        return out


def _ml_copies(info: ManagedLedgerInfo) -> set[Copy]:
    """The copies an ML list references: each ledger's BookKeeper copy unless its offload
    completed with `bookkeeperDeleted`, and each offloaded copy by its uuid."""
    copies: set[Copy] = set()
    for entry in info.ledgerInfo:
        ctx = entry.offloadContext if entry.HasField("offloadContext") else None
        if ctx is None or not (ctx.complete and ctx.bookkeeperDeleted):
            copies.add((entry.ledgerId, LEDGER, ""))
        if ctx is not None and ctx.HasField("uidMsb"):
            copies.add((entry.ledgerId, OFFLOAD, offload_uuid(ctx) or ""))
    return copies


def _acked(topic: Topic) -> int:
    return sum(1 for e in topic.entries() if e.state == ACKED)
