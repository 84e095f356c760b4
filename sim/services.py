"""The real services, wired to the in-memory ports, each crashable and restartable.

A service's tasks are found by a context variable that every task it creates inherits (the
loop's task factory records it), so a crash cancels exactly that service's work at whatever
await point it is, closes its sessions, consumers and producers (nothing it does afterwards
reaches durable state), and a restart builds it afresh: in-memory state (journal, caches,
batches) is lost, durable state (ZooKeeper, the topics, S3) is kept.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import random
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.config import OffloadDefaults
from services.core.errors import Unavailable
from services.core.signing import IntentSigner, TrustedKeys
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.s3 import S3OffloadDeleter
from services.deleter.backends.zookeeper import ZooKeeperLedgerDeleter
from services.deleter.handling import Backends, Handler
from services.deleter.metrics import DeleterMetrics
from services.deleter.outage import Dependency, OutageGate
from services.deleter.pool import DeleterPool, PoolSettings
from services.deleter.ports import VerifierUnreachable
from services.marker.believe import BackgroundBeliever
from services.marker.follower.follower import Follower, FollowerSettings
from services.marker.follower.leadership import LEADER_PATH
from services.marker.follower.metrics import FollowerMetrics
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker, MarkingSettings, MarkResult
from services.marker.metrics import MarkerMetrics
from services.marker.owners import EncodingOptions
from services.marker.planning import MarkRequest
from services.metadata.layout import LayoutWatch
from services.metadata.paths import LedgerLayout, LedgerLocations
from services.metadata.pulsar_stores import ManagedLedgers
from services.systopic.retry import RetryPolicy
from services.systopic.subscription_watch import GatedPublisher, SubscriptionWatch, WatchSettings
from services.verifier._s3 import S3ObjectStore
from services.verifier.believed import BelievedConfig, BelievedSet
from services.verifier.clusters import ClusterScope, Neighbour
from services.verifier.decision import DecisionEngine, DecisionPolicy
from services.verifier.offload import OffloadInspector, OffloadPolicy
from services.verifier.owners import OwnerCache
from services.verifier.servicer import verdict_to_proto
from services.verifier.shadows import ShadowIndex
from services.verifier.signatures import SignatureGate
from services.verifier.store_adapter import MetadataZnodeStore
from services.verifier.validation import parse_target
from sim.pulsar import CLUSTER, NEIGHBOUR
from sim.s3 import S3, S3Client
from sim.scheduler import Fault, Scheduler
from sim.topic import Consumer, Producer, SubscriptionAdmin, Topic
from sim.zk import Session, ZooKeeper
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf

_M = TypeVar("_M")
_METRICS: dict[str, object] = {}
"""One metrics object per service name for the whole process: building Prometheus
collectors costs more than a run, and no decision reads them."""


def _metrics(name: str, build: type[_M]) -> _M:
    found = _METRICS.get(name)
    if not isinstance(found, build):
        found = _METRICS[name] = build()
    return found


SERVICE: contextvars.ContextVar[str] = contextvars.ContextVar("sim_service", default="world")


@dataclass(frozen=True)
class SimRetryPolicy(RetryPolicy):
    """The deleter's policy, its jitter drawn from the scheduler's generator."""

    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        return super().delay(attempt, rng or self.rng)


async def _outcome_of(task: asyncio.Task[Any]) -> None:
    """Wait for a call's task in the callee's context; when the caller is cancelled (its own
    crash, or the end of the run) the outcome is nobody's, and is dropped, not logged."""
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError:
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        raise


class _BelieveHop:
    """The marker's `BelieveClient`: the verifier of the run, reached when the call is made."""

    def __init__(self, d: Durable) -> None:
        self._d = d

    async def believe(self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]) -> None:
        verifier = self._d.verifier
        if verifier is None:
            raise Unavailable("no verifier yet")
        await verifier.believe(pdlis)


class Registry:
    """Which service created which task (the loop's task factory)."""

    def __init__(self) -> None:
        self.tasks: dict[str, list[asyncio.Task[Any]]] = {}
        self.on_failure: Callable[[str, BaseException], None] = lambda service, error: None
        """Called when a service's background loop ends with an error."""

    def factory(
        self, loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
    ) -> asyncio.Task[Any]:
        context = kwargs.get("context")
        # A task runs in a copy of its creator's context (or the one given): it inherits it.
        owner = SERVICE.get() if context is None else context.get(SERVICE, "world")
        task = asyncio.Task(coro, loop=loop, **kwargs)
        if owner != "world":
            tasks = self.tasks.setdefault(owner, [])
            tasks[:] = [t for t in tasks if not t.done()]
            tasks.append(task)
        return task

    def start(self, service: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        context = contextvars.copy_context()
        context.run(SERVICE.set, service)
        return asyncio.get_running_loop().create_task(coro, context=context)

    def background(self, service: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """A loop the service runs while it is up (the runner's `add_background`): ending
        with an error stops the real service, so it is reported to `on_failure`."""
        task = self.start(service, coro)
        task.add_done_callback(functools.partial(self._ended, service))
        return task

    def _ended(self, service: str, task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.on_failure(service, task.exception())  # type: ignore[arg-type]

    def cancel(self, service: str) -> None:
        for task in self.tasks.pop(service, []):
            task.cancel()


@dataclass
class Durable:
    sched: Scheduler
    zk: ZooKeeper
    s3: S3
    main: Topic
    retry: Topic
    dlq: Topic
    registry: Registry
    allowed_buckets: frozenset[str]
    delivery_delay: timedelta
    pause_after_send: timedelta | None = None
    signing: str = "off"
    outage_gate: bool = False
    """Run the deleters with their outage gate (held messages, probes) or without (an
    outage is an ordinary RETRY)."""
    """`off`; `optional` (the marker signs, unsigned PDLIs are judged as before);
    `required` (unsigned or badly signed PDLIs are FORGED)."""
    checkpoint_interval: timedelta = timedelta(seconds=60)
    """The followers' checkpoint interval."""
    offload_defaults: OffloadDefaults = field(default_factory=OffloadDefaults)
    """The operator's default offloader (`TOMBSTONE_OFFLOAD_DEFAULT_*`), read by the marker,
    its follower and the verifier for contexts Pulsar 2.1 wrote (no driver metadata)."""
    layout: LedgerLayout = LedgerLayout.HIERARCHICAL
    """What `<root>/LAYOUT` names (the verifier learns it from the znode, as it does live)."""
    verifier: VerifierService | None = None
    """The run's verifier, once started (the markers' `Believe` calls reach it)."""
    shadow_scan_interval: timedelta = timedelta(seconds=30)
    """The verifier's shadow-topic index rebuild period."""
    encoding: EncodingOptions = field(default_factory=EncodingOptions)
    """How the brokers compress ML and cursor znodes; the marker writes them the same way."""
    neighbour: ZooKeeper | None = None
    """The metadata store of the cluster sharing our ledgers root (`sim/neighbour.py`)."""
    neighbour_declared: bool = False
    """Whether the verifier is told of it (`TOMBSTONE_SHARED_CLUSTERS`)."""


def _watch_layout(d: Durable, session: Session, service: str) -> LayoutWatch:
    """`LAYOUT` as the verifier and the deleter follow it (`confirm_ledgers_root` reads it at
    start, then `LayoutWatch` watches it), running as the service's background loop."""
    watch = LayoutWatch(session, LedgerLocations(layout=d.layout))
    d.registry.background(service, watch.run())
    return watch


# A fixed key: signatures are deterministic (Ed25519), so a seed replays with the same bytes.
MARKER_KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"tombstone sim").digest())
KEY_ID = "sim-marker"
MAX_RETRIES = 6
"""The deleters' retry budget."""
SCHEMA_MIN_AGE = timedelta(seconds=10)
"""The verifier's `TOMBSTONE_VERIFIER_SCHEMA_MIN_AGE`. Its default (2 minutes) outlasts the
deleters' retry budget here (6 retries, 1 s doubling to 20 s: about 50 s), which would
dead-letter every schema deleted within 2 minutes of its last version; 10 s still covers the
window it guards (`putSchema` closes the ledger and writes the locator within a second)."""
PROPERTY_LEDGER_MIN_AGE = timedelta(seconds=10)
"""The verifier's `TOMBSTONE_VERIFIER_PROPERTY_LEDGER_MIN_AGE`, scaled as `SCHEMA_MIN_AGE`:
its default (10 minutes) outlasts the whole run; 10 s covers the window it guards (a
compaction or bucket seal writes its property within a second of the ledger's close,
`sim/compaction.py`, `sim/buckets.py`)."""
SHADOW_MARGIN = timedelta(seconds=10)
"""`TOMBSTONE_VERIFIER_SHADOW_CLOCK_ALLOWANCE`, its default; it also covers a shadow's broker
reading its source's list up to 2 s before writing the shadow (`sim/shadows.py`)."""
DELETER_SUBSCRIPTION = "tombstone-deleter"
WATCH = WatchSettings(
    topic="persistent://pulsar/system/main",
    subscription=DELETER_SUBSCRIPTION,
    partitions=3,
    interval=timedelta(seconds=2),
    unknown_grace=timedelta(seconds=10),
)
"""The markers' watch on the deleters' subscription (`TOMBSTONE_MARKER_SUBSCRIPTION_CHECK_*`,
shortened to the run's scale)."""
SHADOW_MIN_GAP = timedelta(seconds=5)
"""`TOMBSTONE_VERIFIER_SHADOW_SCAN_MIN_GAP`: a verdict waiting for a fresh shadow scan gets one
within margin + gap (15 s), well inside the retry budget."""


class MarkerService:
    """A marker; with `follow`, it also runs the follower (`--follow`) on a session of its own,
    publishing through the marker's producer, signed by its signer, told of the marker's own
    unlinks: it crashes and restarts with the marker, its index lost, its checkpoint kept."""

    def __init__(self, d: Durable, name: str, *, follow: bool = False) -> None:
        self.d, self.name = d, name
        self.follow = follow
        self.follower: Follower | None = None
        self.follower_session: Session | None = None
        self.up = False
        self.start()

    def start(self) -> None:
        d = self.d
        self.session = Session(d.zk, self.name)
        self.producer = Producer(d.main, self.name)
        # As `open_watch` and `GatedPublisher` in the service: nothing is published before
        # a check has found the deleters' subscription on every partition.
        self.watch = SubscriptionWatch(
            SubscriptionAdmin(d.main, DELETER_SUBSCRIPTION),  # type: ignore[arg-type]
            WATCH,
            clock=d.sched.now,
        )
        d.registry.background(self.name, _run_watch(self.watch))
        self.publisher = GatedPublisher(self.producer, self.watch)
        settings = MarkingSettings(
            marker_id=self.name,
            cluster=CLUSTER,
            delivery_delay=d.delivery_delay,
            retry_window=timedelta(seconds=60),
            # The service's own test hook: widens the window between the last receipt and
            # the owner write, where a crash leaves intents whose fence is never reached.
            pause_after_send=d.pause_after_send,
            offload_defaults=d.offload_defaults,
            encoding=d.encoding,
        )
        journal = ReceiptJournal(retry_window=settings.retry_window, clock=d.sched.now_ms)
        signer = None if d.signing == "off" else IntentSigner({KEY_ID: MARKER_KEY}, KEY_ID)
        metrics = _metrics(self.name, MarkerMetrics)
        self.marker = Marker(
            store=self.session,
            publisher=self.publisher,
            journal=journal,
            settings=settings,
            metrics=metrics,
            signer=signer,
            believer=BackgroundBeliever(_BelieveHop(d), metrics),
        )
        if self.follow:
            self._start_follower(signer)
        self.up = True

    def _start_follower(self, signer: IntentSigner | None) -> None:
        d = self.d
        self.follower_session = Session(d.zk, f"{self.name}-follower")
        self.follower = Follower(
            store=self.follower_session,
            publisher=self.publisher,
            settings=FollowerSettings(
                marker_id=self.name,
                cluster=CLUSTER,
                delivery_delay=d.delivery_delay,
                checkpoint_interval=d.checkpoint_interval,
                offload_defaults=d.offload_defaults,
            ),
            metrics=_metrics(f"{self.name}-follower", FollowerMetrics),
            signer=signer,
            own_writes=self.marker.own_writes,
            gate=self.watch,
        )
        self.d.registry.background(self.name, self.follower.run(asyncio.Event()))

    def leads(self) -> bool:
        """This marker's follower is up, holds the leader znode and follows (not fenced)."""
        follower, session = self.follower, self.follower_session
        if not self.up or follower is None or session is None or not follower.active:
            return False
        node = self.d.zk.nodes.get(LEADER_PATH)
        return node is not None and node.ephemeral_owner == session.session_id

    def crash(self) -> None:
        self.up = False
        self.session.close()
        if self.follower_session is not None:
            self.follower_session.close()
        self.producer.closed = True
        self.d.registry.cancel(self.name)

    async def mark(self, request: MarkRequest) -> MarkResult:
        """One MarkLedgers call from a broker (the gRPC hop can lose it either way)."""
        sched = self.d.sched
        fault = await sched.io(f"grpc {self.name}.Mark {request.owner.path}")
        if not self.up or fault is Fault.BEFORE or fault is Fault.ERROR:
            raise Unavailable(f"{self.name} unreachable")
        task = self.d.registry.start(self.name, self.marker.mark(request))
        await _outcome_of(task)
        if task.cancelled():
            raise Unavailable(f"{self.name} crashed during the call")
        result: MarkResult = task.result()
        if fault is Fault.AFTER:
            raise Unavailable(f"{self.name}: answer lost")
        return result


async def _run_watch(watch: SubscriptionWatch) -> None:
    await watch.check()
    await watch.run(asyncio.Event())


class VerifierService:
    """The verifier's decision engine; the deleters reach it as their `VerdictSource`."""

    def __init__(self, d: Durable, name: str = "verifier") -> None:
        self.d, self.name = d, name
        self.up = False
        self.on_verdict: Callable[[_pd.PendingDeleteLedgerInfo, int], None] | None = None
        """Called with each verdict as it is returned (the workload's worst-moment hooks)."""
        self.start()

    def start(self) -> None:
        d = self.d
        self.session = Session(d.zk, self.name)
        znodes = MetadataZnodeStore(self.session)
        objects = S3ObjectStore(S3Client(d.s3, self.name), bucket_check_ttl=0.0)
        policy = OffloadPolicy(
            allowed_buckets=d.allowed_buckets,
            cluster_name=CLUSTER,
            default_bucket=d.offload_defaults.bucket,
            default_driver=d.offload_defaults.driver,
        )
        self.layout = _watch_layout(d, self.session, self.name)
        # The shadow-topic index, scanned at start and then every `shadow_scan_interval`
        # (as `open_verifier` runs it): until its first scan, data-ledger verdicts are RETRY.
        self.shadows = ShadowIndex(
            znodes, ManagedLedgers(self.session).managed_ledger_names, clock=d.sched.now
        )
        d.registry.background(self.name, self.shadows.run(d.shadow_scan_interval, SHADOW_MIN_GAP))
        # The believed set, durable in ZooKeeper, loaded and followed as `open_verifier` runs it.
        self.believed = BelievedSet(znodes, BelievedConfig(), clock=d.sched.now)
        d.registry.background(self.name, self.believed.maintain())
        # Whose owner? Our cluster's name, our store as the configuration store (namespace
        # policies), and the neighbour's store when the operator declared it.
        neighbours: list[Neighbour] = []
        self.neighbour_session: Session | None = None
        if d.neighbour is not None and d.neighbour_declared:
            self.neighbour_session = Session(d.neighbour, self.name)
            theirs = OwnerCache(MetadataZnodeStore(self.neighbour_session))
            neighbours.append(Neighbour(NEIGHBOUR, theirs))
        scope = ClusterScope(cluster=CLUSTER, configuration=znodes, neighbours=neighbours)
        self.engine = DecisionEngine(
            store=znodes,
            owners=OwnerCache(znodes),
            believed=self.believed,
            shadows=self.shadows,
            offload=OffloadInspector(objects, policy),
            policy=DecisionPolicy(
                locations=lambda: self.layout.current,
                reconciler_min_age=timedelta(seconds=30),
                open_ledger_age=timedelta(hours=2),
                schema_min_age=SCHEMA_MIN_AGE,
                property_ledger_min_age=PROPERTY_LEDGER_MIN_AGE,
                shadow_margin=SHADOW_MARGIN,
            ),
            scope=scope,
            clock=d.sched.now,
            signatures=None
            if d.signing == "off"
            else SignatureGate(
                TrustedKeys({KEY_ID: MARKER_KEY.public_key()}),
                require_signed=d.signing == "required",
            ),
        )
        self.up = True

    def crash(self) -> None:
        self.up = False
        self.session.close()
        if self.neighbour_session is not None:
            self.neighbour_session.close()
        self.d.registry.cancel(self.name)

    async def believe(self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]) -> None:
        """The `Believe` call from a marker (the gRPC hop can lose it either way)."""
        fault = await self.d.sched.io(f"grpc verifier.Believe {[p.ledger_id for p in pdlis]}")
        if not self.up or fault is Fault.BEFORE or fault is Fault.ERROR:
            raise Unavailable("verifier unreachable")
        keys = [parse_target(pdli).believed_key for pdli in pdlis]  # as the servicer does
        task = self.d.registry.start(self.name, self.believed.add(keys))
        await _outcome_of(task)
        if task.cancelled():
            raise Unavailable("verifier crashed during the call")
        task.result()
        if fault is Fault.AFTER:
            raise Unavailable("verifier: answer lost")

    async def probe(self) -> None:
        """The deleter's outage probe of the verifier (a health call)."""
        fault = await self.d.sched.io("grpc verifier.Health")
        if not self.up or fault is not Fault.NONE:
            raise VerifierUnreachable("verifier unreachable")

    async def verify(self, pdli: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        fault = await self.d.sched.io(f"grpc verifier.Verify {pdli.ledger_id}")
        if not self.up or fault is Fault.BEFORE or fault is Fault.ERROR:
            raise VerifierUnreachable("verifier unreachable")
        task = self.d.registry.start(self.name, self.engine.verify(pdli))
        await asyncio.wait([task])
        if task.cancelled():
            raise VerifierUnreachable("verifier crashed during the call")
        if fault is Fault.AFTER:
            raise VerifierUnreachable("verifier: answer lost")
        verdict = task.result()
        response = verdict_to_proto(verdict)
        decision = _vf.Decision.Name(response.decision)
        if response.decision == _vf.SKIP:
            decision += " " + _vf.SkipReason.Name(response.skip_reason)
        if response.decision != _vf.DELETE:
            decision += f" ({verdict.code})"  # the metric label: which rule answered
        tier = _pd.LedgerType.Name(pdli.ledger_type)
        self.d.sched.log(f"verdict {pdli.ledger_id} {tier}: {decision} {response.reason[:60]}")
        if self.on_verdict is not None:
            self.on_verdict(pdli, response.decision)
        return response


class DeleterService:
    def __init__(
        self, d: Durable, name: str, verifier: VerifierService, *, start: bool = True
    ) -> None:
        """With `start` False the deleter is not up yet (a deployment whose markers start
        first): `start()` later subscribes, which creates the subscription."""
        self.d, self.name, self.verifier = d, name, verifier
        self.up = False
        if start:
            self.start()

    def start(self) -> None:
        d = self.d
        self.session = Session(d.zk, self.name)
        limits = BackendLimits(concurrency=16, per_second=100_000)
        self.layout = _watch_layout(d, self.session, self.name)
        self.bookkeeper = ZooKeeperLedgerDeleter(
            self.session, locations=lambda: self.layout.current, limits=limits
        )
        self.s3 = S3OffloadDeleter(
            S3Client(d.s3, self.name), allowed_buckets=d.allowed_buckets, limits=limits
        )
        self.consumers = [Consumer(d.main, self.name), Consumer(d.retry, self.name)]
        self.producers = [Producer(d.retry, self.name), Producer(d.dlq, self.name)]
        metrics = _metrics(self.name, DeleterMetrics)
        gate = None
        if d.outage_gate:
            probes = {
                Dependency.VERIFIER: self.verifier.probe,
                Dependency.ZOOKEEPER: self.bookkeeper.probe,
                Dependency.S3: self.s3.probe,
            }
            gate = OutageGate(probes, metrics=metrics, clock=d.sched.now)
        handler = Handler(
            verdicts=self.verifier,
            backends=Backends(bookkeeper=self.bookkeeper, s3=self.s3),
            retry_sink=self.producers[0],
            dead_letter_sink=self.producers[1],
            policy=SimRetryPolicy(
                initial_delay=timedelta(seconds=1),
                max_delay=timedelta(seconds=20),
                max_retries=MAX_RETRIES,
                rng=d.sched.rng,
            ),
            max_hold=timedelta(seconds=30),
            metrics=metrics,
            outage=gate,
            clock=d.sched.now,
        )
        self.pool = DeleterPool(
            handler,
            self.consumers,
            settings=PoolSettings(max_in_flight=64),
            metrics=metrics,
            outage=gate,
            clock=d.sched.now,
        )
        self.stop = asyncio.Event()
        self.task = d.registry.background(self.name, self.pool.run(self.stop))
        self.up = True

    def crash(self) -> None:
        self.up = False
        self.session.close()
        for producer in self.producers:
            producer.closed = True
        for consumer in self.consumers:
            consumer.closed = True
            consumer._topic.drop_consumer(consumer)
        self.d.registry.cancel(self.name)
