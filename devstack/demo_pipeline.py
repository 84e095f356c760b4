"""The trim-and-delete stage of the local demo: broker, verifier, marker (with its follower)
and deleter as real processes; half the simulated topics trimmed and their cursor ledgers
unlinked through the marker (left OPEN, as Pulsar leaves them), the other half trimmed,
switched and unsubscribed the way unmodified brokers do it, a share of their own deletes
failing (`demo_brokers`); progress until the deleter has settled everything; the dead
letters read back; a summary per artifact kind and the S1/L1 check over both
(`demo_outcome`). When a neighbour cluster shares the BookKeeper (`devstack.neighbour`), its
ledgers are sent to the marker as a careless reconciler would send them, and the check
covers them too: kept, their intents dead-lettered as `foreign`.

`devstack/demo.py` calls `trim_and_delete(...)` after seeding the cluster. On its own:

    .venv/bin/python -m devstack.demo_pipeline [--topics 5]

starts ZooKeeper and S3 too and seeds a cluster first.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from grpc import aio

from devstack import demo_brokers, demo_outcome, demo_props, demo_reconcile
from devstack.demo_outcome import BOOKKEEPER, OFFLOAD, Unlinked
from devstack.demo_stores import DemoMetadata, ZooKeeperMetadata, reconcile_target
from devstack.neighbour import PlantedNeighbour, Role
from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.reconcile_command import SEEDED_MIN_AGE
from devstack.s3 import S3Locations, S3Server
from devstack.services import ServiceProcess, signing_envs
from devstack.simulator.broker import DeleteFaults
from devstack.simulator.broker_run import BrokerStylePlan, choose
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import ReadBack, read_cluster
from devstack.simulator.run import simulate_into
from devstack.simulator.s3 import open_object_stores
from devstack.simulator.spec import ClusterSpec, legacy_spec
from devstack.simulator.trim import trim
from devstack.zookeeper import ZooKeeperServer
from services.core.config import PulsarConfig
from services.core.durations import format_duration
from services.systopic.setup import SetupPlan, prepare_topics
from tombstone.v1 import deleter_pb2 as _dl
from tombstone.v1 import deleter_pb2_grpc as _dl_grpc
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

SYSTEM_TOPIC = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 2
Echo = Callable[[str], None]


@dataclass
class Summary:
    """What the stage did, for the demo's last lines."""

    ledgers_marked: int = 0
    pdlis_sent: int = 0
    not_marked: int = 0
    deleted: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    dead_lettered: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    unlinked: list[Unlinked] = field(default_factory=list)
    """The (ledger, tier) pairs the marker unlinked, which the protocol must delete."""
    artifacts: list[str] = field(default_factory=list)
    """Per artifact kind: deleted / dead-lettered(reason) / kept."""
    problems: list[str] = field(default_factory=list)
    """S1/L1 violations found by the final check; empty when the run was correct."""
    broker_style: str | None = None
    """The broker-style line (`demo_brokers.summary_line`), when brokers unlinked too."""
    neighbour: str | None = None
    """The neighbour cluster's line (`demo_outcome.neighbour_line`), when one was planted."""
    reconciler: demo_reconcile.ReconcileSummary | None = None
    """What the reconciler stage proposed, submitted and saw deleted, when it ran."""

    def render(self) -> str:
        def fmt(counts: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"

        per_artifact = ["per artifact (unlinked ledger tiers):", *self.artifacts]
        return "\n".join(
            [
                f"marked: {self.ledgers_marked} ledgers ({self.pdlis_sent} PDLIs), "
                f"{self.not_marked} not marked",
                f"deleted: {fmt(self.deleted)}",
                f"skipped: {fmt(self.skipped)}",
                f"dead-lettered: {fmt(self.dead_lettered)}",
                *(per_artifact if self.artifacts else []),
                *([self.broker_style] if self.broker_style else []),
                *([self.neighbour] if self.neighbour else []),
                f"time: {self.seconds:.1f}s",
                "check: "
                + (
                    "S1 and L1 hold (what the protocol unlinked is gone or dead-lettered with a "
                    "reason, everything else is kept)"
                    if not self.problems
                    else f"{len(self.problems)} problems: " + "; ".join(self.problems[:10])
                ),
            ]
        )


async def _start(name: str, env: dict[str, str], workdir: Path) -> ServiceProcess:
    """`python -m services.<name>` with its log in `workdir`, once it is ready."""
    service = ServiceProcess(f"services.{name}", workdir / f"{name}.log", env=env)
    await service.start()
    return service


def merged_system_env(
    model: ClusterModel, min_age: timedelta = SEEDED_MIN_AGE
) -> dict[str, dict[str, str]]:
    """Per service, the settings the legacy artifacts and the safety checks need.

    - 2.1 offload contexts carry no driver or bucket: the operator's default offloader
      applies, the same for the marker, the verifier and the deleter (the services compare
      it with each other at start, `services.metadata.peer_settings`).
    - Signed intents (the marker's signing key, the verifier's trusted key, signatures
      required) are the proof of ownership of artifacts without owner metadata (pre-2.2
      ledgers, pre-2.10 objects) and of an unsubscribed cursor's OPEN ledger.
    - The marker's retry window is shorter than the deleter's retry budget below (17.6 s at
      least), which the services also check against each other at start.
    - The verifier's own age windows for RECONCILER intents and for OPEN ledgers (from which
      an OPEN ledger is no longer taken as in creation) are the reconciler stage's
      (`min_age`, `reconcile_command.SEEDED_MIN_AGE` unless the demo was given a shorter
      one): the planted orphans it submits are minutes old,
      and at the default 3 days the verifier would retry them into the DLQ.
    """
    marker_signing, verifier_signing = signing_envs()
    window = format_duration(min_age)
    offload = {
        "TOMBSTONE_OFFLOAD_DEFAULT_BUCKET": model.spec.bucket,
        "TOMBSTONE_OFFLOAD_DEFAULT_DRIVER": "aws-s3",
    }
    return {
        "verifier": {
            **offload,
            **verifier_signing,
            "TOMBSTONE_VERIFIER_RECONCILER_MIN_AGE": window,
            "TOMBSTONE_VERIFIER_OPEN_LEDGER_AGE": window,
            "TOMBSTONE_VERIFIER_PROPERTY_LEDGER_MIN_AGE": PROPERTY_LEDGER_MIN_AGE_TEXT,
        },
        "marker": {**offload, **marker_signing, "TOMBSTONE_MARKER_RETRY_WINDOW": "10s"},
        "deleter": dict(offload),
    }


PROPERTY_LEDGER_MIN_AGE_TEXT = "10s"
"""The demo verifier's `TOMBSTONE_VERIFIER_PROPERTY_LEDGER_MIN_AGE`: the demo's broker writes
each property a moment after its ledger (`devstack.demo_props`), and its leaks are planted a
few seconds before the follower reports them; at the default 10 minutes they would be retried
into the DLQ."""

PULSAR_SECURITY = ("none", "token", "oauth2")
"""How the demo's broker is secured: plain, or TLS with token or OAuth2 authentication."""
PULSAR_SECURITY_ENV = "DEVSTACK_PULSAR_SECURITY"
"""Chooses among `PULSAR_SECURITY` when the caller does not (`tombstone demo
--pulsar-security` reads it as its default)."""


def pulsar_security(chosen: str | None = None) -> str:
    choice = (chosen or os.environ.get(PULSAR_SECURITY_ENV) or "none").strip().lower()
    if choice not in PULSAR_SECURITY:
        raise ValueError(f"{PULSAR_SECURITY_ENV}: expected one of {', '.join(PULSAR_SECURITY)}")
    return choice


def _broker(security: str, workdir: Path) -> PulsarBrokerProcess:
    if security == "none":
        return PulsarBrokerProcess()
    return PulsarBrokerProcess(secure_dir=workdir / "pulsar-security")


def _pulsar_env(broker: PulsarBrokerProcess, security: str) -> dict[str, str]:
    """URLs and, for a secured broker, its CA and the credentials of `security`."""
    return broker.tombstone_environment("token" if security == "none" else security)


def _common_env(
    metadata: DemoMetadata, s3: S3Locations, broker: PulsarBrokerProcess, security: str
) -> dict[str, str]:
    return {
        **metadata.service_env(),
        **_pulsar_env(broker, security),
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        **s3.service_env(),
    }


async def start_services(
    model: ClusterModel,
    metadata: DemoMetadata,
    s3: S3Locations,
    broker: PulsarBrokerProcess,
    workdir: Path,
    security: str = "none",
    min_age: timedelta = SEEDED_MIN_AGE,
) -> tuple[ServiceProcess, ServiceProcess, ServiceProcess, int]:
    """Verifier, marker and deleter processes; returns them and the deleter's metrics port."""
    common = _common_env(metadata, s3, broker, security)
    extra = merged_system_env(model, min_age)
    buckets = ",".join(sorted({o.bucket for o in model.objects.values()}) or [model.spec.bucket])
    verifier = await _start(
        "verifier",
        {
            **common,
            "TOMBSTONE_S3_ALLOWED_BUCKETS": buckets,
            "TOMBSTONE_VERIFIER_CLUSTER_NAME": model.spec.cluster_name,
            **extra["verifier"],
        },
        workdir,
    )
    address = f"127.0.0.1:{verifier.port}"
    marker = await _start(
        "marker",
        {
            **common,
            "TOMBSTONE_VERIFIER_ADDRESS": address,
            "TOMBSTONE_MARKER_CLUSTER": model.spec.cluster_name,
            "TOMBSTONE_MARKER_ID": "demo-marker",
            "TOMBSTONE_MARKER_DELIVERY_DELAY": "1s",
            **demo_brokers.FOLLOW_ENV,
            **extra["marker"],
        },
        workdir,
    )
    metrics_port = free_port()
    deleter = await _start(
        "deleter",
        {
            **common,
            "TOMBSTONE_VERIFIER_ADDRESS": address,
            "TOMBSTONE_S3_ALLOWED_BUCKETS": buckets,
            "TOMBSTONE_METRICS_PORT": str(metrics_port),
            "TOMBSTONE_DELETER_ID": "demo-deleter",
            "TOMBSTONE_DELETER_RETRY_MAX_DELAY": "5s",
            "TOMBSTONE_DELETER_MAX_RETRIES": "6",
            **extra["deleter"],
        },
        workdir,
    )
    return verifier, marker, deleter, metrics_port


async def trim_all(
    model: ClusterModel,
    marker_port: int,
    summary: Summary,
    echo: Echo,
    brokers: BrokerStylePlan | None = None,
) -> None:
    """What the brokers would do, through the marker's MarkLedgers: retention drops all but
    each topic's current ledger (shadow topics are trimmed by their source), and every
    cursor with a ledger moves its position into its znode, its ledger left OPEN. Topics
    `brokers` owns are left to the broker-style stage."""
    owned = brokers.topics if brokers is not None else ()
    async with aio.insecure_channel(f"127.0.0.1:{marker_port}") as channel:
        stub = _mk_grpc.MarkerStub(channel)
        for ml in model.managed_ledgers.values():
            if len(ml.ledger_ids) < 2 or ml.shadow_source or ml.name in owned:
                continue
            expected = trim(model, ml.name, len(ml.ledger_ids) - 1)
            request = _mk.MarkLedgersRequest(
                component=_pd.MANAGED_LEDGER,
                managed_ledger_name=ml.name,
                ledger_ids=expected.ledger_ids,
            )
            marked = await _mark(stub, request, summary)
            done = [t for t in expected.trimmed if t.ledger_id in marked]
            summary.unlinked += demo_outcome.from_trim(model, done)
        await unlink_cursor_ledgers(model, stub, summary, owned)
    echo(
        f"trimmed through the marker: {summary.ledgers_marked} ledgers, {summary.pdlis_sent} PDLIs"
    )


async def unlink_cursor_ledgers(
    model: ClusterModel,
    stub: _mk_grpc.MarkerStub,
    summary: Summary,
    skip_topics: tuple[str, ...] = (),
) -> None:
    """A cursor closing or switching: `ManagedCursorImpl` writes the cursor znode (here: the
    position kept in it, cursorsLedgerId -1), then deletes the old ledger by id without
    closing it (`asyncDeleteCursorLedger`, `switchToNewLedger`). The marker records the intent
    before that write; the ledger stays OPEN."""
    for cursor in model.cursors.values():
        if cursor.cursors_ledger_id < 0 or cursor.ml_name in skip_topics:
            continue
        request = _mk.MarkLedgersRequest(
            component=_pd.MANAGED_CURSOR,
            managed_ledger_name=cursor.ml_name,
            cursor_name=cursor.name,
            ledger_ids=[cursor.cursors_ledger_id],
        )
        if cursor.cursors_ledger_id in await _mark(stub, request, summary):
            summary.unlinked.append(demo_outcome.cursor_ledger(model, cursor.cursors_ledger_id))


async def _mark(
    stub: _mk_grpc.MarkerStub, request: _mk.MarkLedgersRequest, summary: Summary
) -> set[int]:
    response = await stub.MarkLedgers(request, timeout=60)
    summary.ledgers_marked += len(response.marked)
    summary.pdlis_sent += response.pdlis_sent
    summary.not_marked += len(response.not_marked)
    return {m.ledger_id for m in response.marked}


async def dead_letters(deleter_port: int) -> dict[tuple[int, str], str]:
    """(ledger id, tier) → reason code of every PDLI in the dead-letter topic."""
    return {key: code for key, (code, _) in (await dead_letter_reasons(deleter_port)).items()}


async def dead_letter_reasons(deleter_port: int) -> dict[tuple[int, str], tuple[str, str]]:
    """(ledger id, tier) → (reason code, reason text) of every PDLI in the dead-letter topic."""
    async with aio.insecure_channel(f"127.0.0.1:{deleter_port}") as channel:
        stub = _dl_grpc.DeleterAdminStub(channel)
        listed = await stub.ListDeadLetters(_dl.ListDeadLettersRequest(limit=10000), timeout=60)
    out = {}
    for letter in listed.dead_letters:
        if letter.HasField("pdli") and letter.pdli.HasField("ledger_id"):
            tier = OFFLOAD if letter.pdli.ledger_type == _pd.OFFLOAD_LEDGER else BOOKKEEPER
            out[(letter.pdli.ledger_id, tier)] = (letter.reason_code, letter.reason)
    return out


async def mark_neighbour(neighbour: PlantedNeighbour, marker_port: int, echo: Echo) -> None:
    """Every ledger of the (undeclared) neighbour, sent to our marker as RECONCILER requests,
    as a reconciler that does not know the neighbour (or an older one) would: each is
    unreferenced by any owner of ours. The marker has no neighbour declared to refuse them
    with, so it sends the intents; the verifier must dead-letter them as FOREIGN."""
    data = neighbour.ids(Role.ORPHAN, Role.CLOSED, Role.CURRENT)
    requests = [
        _mk.MarkLedgersRequest(
            component=_pd.MANAGED_LEDGER, managed_ledger_name=neighbour.ml_name, ledger_ids=data
        ),
        _mk.MarkLedgersRequest(
            component=_pd.MANAGED_CURSOR,
            managed_ledger_name=neighbour.ml_name,
            cursor_name=neighbour.cursor,
            ledger_ids=neighbour.ids(Role.CURSOR),
        ),
        _mk.MarkLedgersRequest(
            component=_pd.SCHEMA_STORAGE,
            schema_id=neighbour.schema_id,
            ledger_ids=neighbour.ids(Role.SCHEMA),
        ),
    ]
    marked = sent = 0
    refused: list[str] = []
    async with aio.insecure_channel(f"127.0.0.1:{marker_port}") as channel:
        stub = _mk_grpc.MarkerStub(channel)
        for request in requests:
            request.source = _pd.RECONCILER
            response = await stub.MarkLedgers(request, timeout=60)
            marked += len(response.marked)
            sent += response.pdlis_sent
            refused += [
                f"{n.ledger_id} {_mk.NotMarkedReason.Name(n.reason)}" for n in response.not_marked
            ]
    echo(
        f"neighbour {neighbour.cluster!r}: its {len(neighbour.ledgers)} ledgers sent to our "
        f"marker as a reconciler would: {marked} marked ({sent} PDLIs)"
        + (f", refused: {', '.join(refused)}" if refused else "")
    )


def _counters(port: int) -> dict[str, dict[str, int]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    out: dict[str, dict[str, int]] = collections.defaultdict(dict)
    for line in text.splitlines():
        for name in ("deleted", "skipped", "dead_lettered"):
            prefix = f"tombstone_deleter_{name}_total{{"
            if line.startswith(prefix):
                label = line[len(prefix) :].split('"')[1]
                out[name][label] = int(float(line.rsplit(" ", 1)[1]))
    return out


async def follow(deleter_port: int, metrics_port: int, echo: Echo, timeout: float) -> None:
    """Print progress until the system and retry topics are drained."""
    async with aio.insecure_channel(f"127.0.0.1:{deleter_port}") as channel:
        stub = _dl_grpc.DeleterAdminStub(channel)
        deadline = time.monotonic() + timeout
        await asyncio.sleep(1.0)  # the marker's delivery delay
        while time.monotonic() < deadline:
            status = await stub.GetStatus(_dl.GetStatusRequest(), timeout=30)
            counts = await asyncio.to_thread(_counters, metrics_port)
            deleted = sum(counts["deleted"].values())
            echo(
                f"  in flight {status.estimated_in_flight:5d}  deleted {deleted:5d}  "
                f"dead letters {status.dead_letter_backlog}"
            )
            if status.estimated_in_flight == 0 and status.in_process == 0:
                return
            await asyncio.sleep(1.0)
    raise TimeoutError(f"the deleter did not drain within {timeout}s")


async def trim_and_delete(
    model: ClusterModel,
    *,
    zookeeper: ZooKeeperServer | None = None,
    metadata: DemoMetadata | None = None,
    s3: S3Locations,
    echo: Echo,
    timeout: float = 300,
    delete_failure_share: float = 0.3,
    settle_timeout: float = 30,
    reconcile_out: Path | None = None,
    seeded_at: float | None = None,
    neighbour: PlantedNeighbour | None = None,
    security: str | None = None,
    props: demo_props.PlantedProps | None = None,
    reconcile_min_age: timedelta = SEEDED_MIN_AGE,
) -> Summary:
    """Run the stage against an already seeded cluster; returns its summary.

    `security` (`none`, `token`, `oauth2`; default `DEVSTACK_PULSAR_SECURITY`, else `none`)
    secures the broker: TLS on both listeners and that authentication, the services and
    `tombstone setup` configured through their `TOMBSTONE_PULSAR_*` settings.

    `delete_failure_share` of the broker-style deletes fail; `settle_timeout` bounds the
    wait for the follower's intents about them to be settled. With `reconcile_out`, the
    reconciler then runs on what is left (`demo_reconcile`), its runs written there, while
    the services still run to delete what it submits; `seeded_at` (time.monotonic()) is when
    the seed was written; `reconcile_min_age` is its runs' --min-age and the verifier's
    windows for what they submit (`merged_system_env`). With `neighbour` (planted in the
    same metadata store, undeclared to the services), its ledgers are sent to the marker too,
    and the checks cover them. With `props` (`devstack.demo_props`), its compaction and bucket
    merge run as unmodified brokers do them, and the checks cover its ledgers too.

    The cluster's metadata is in `metadata` (`devstack.demo_stores`: ZooKeeper, or Oxia's
    `broker` and `bookkeeper` namespaces), or in `zookeeper` alone."""
    if metadata is None:
        assert zookeeper is not None, "trim_and_delete needs a zookeeper or a metadata store"
        metadata = ZooKeeperMetadata(zookeeper)
    summary = Summary()
    started = time.monotonic()
    secured = pulsar_security(security)
    with tempfile.TemporaryDirectory() as tmp, _broker(secured, Path(tmp)) as broker:
        shown = "" if secured == "none" else f" (TLS, {secured} authentication)"
        echo(f"Pulsar (devstack broker) on {broker.service_url}{shown}")
        pulsar = PulsarConfig.from_env(_pulsar_env(broker, secured))
        prepare_topics(
            SetupPlan.for_topic(
                broker.admin_url, SYSTEM_TOPIC, PARTITIONS, security=pulsar.security
            )
        )
        services: list[ServiceProcess] = []
        try:
            verifier, marker, deleter, metrics_port = await start_services(
                model, metadata, s3, broker, Path(tmp), secured, reconcile_min_age
            )
            services = [deleter, marker, verifier]
            echo(f"verifier :{verifier.port}  marker :{marker.port}  deleter :{deleter.port}")
            plan = choose(model)
            await trim_all(model, marker.port, summary, echo, plan)
            faults = DeleteFaults(delete_failure_share, seed=model.spec.seed)
            brokers = await demo_brokers.unlink(
                model, plan, metadata=metadata, s3=s3, faults=faults
            )
            items = demo_brokers.unlinked_items(model, brokers)
            summary.unlinked += items
            echo(
                f"unlinked like unmodified brokers: {brokers.unlinked} ledger tiers, "
                f"{len(brokers.left_behind)} left behind by their failed deletes"
            )
            if props is not None:
                await demo_props.move(props, model, metadata)
                echo(props.moved_line())
                items += props.leaks
                summary.unlinked += props.leaks + props.live
            if neighbour is not None:
                await mark_neighbour(neighbour, marker.port, echo)
            await follow(deleter.port, metrics_port, echo, timeout)

            async def reader() -> tuple[ReadBack, dict[tuple[int, str], str]]:
                return await read_back(model, metadata, s3), await dead_letters(deleter.port)

            if not await demo_brokers.wait_settled(items, reader, timeout=settle_timeout):
                echo(f"  broker-style unlinks not all settled after {settle_timeout:g}s")
            await follow(deleter.port, metrics_port, echo, timeout)
            counts = await asyncio.to_thread(_counters, metrics_port)
            summary.deleted = counts["deleted"]
            summary.skipped = counts["skipped"]
            summary.dead_lettered = counts["dead_lettered"]
            details = await dead_letter_reasons(deleter.port)
            letters = {key: code for key, (code, _) in details.items()}
            reasons = {key: reason for key, (_, reason) in details.items()}
            # The check reads the stores while the services are idle (drained), before the
            # reconciler stage deletes the planted orphans the check expects to be kept.
            now = await read_back(model, metadata, s3)
            summary.artifacts = demo_outcome.artifact_lines(model, summary.unlinked, now, letters)
            summary.problems = demo_outcome.problems(
                model, summary.unlinked, now, letters, neighbour=neighbour, reasons=reasons
            )
            summary.problems += demo_brokers.new_ledger_problems(brokers, now)
            if props is not None:
                summary.problems += props.before_reconciler_problems(now)
            summary.broker_style = demo_brokers.summary_line(brokers, items, now, letters)
            if neighbour is not None:
                summary.neighbour = demo_outcome.neighbour_line(neighbour, now, letters, reasons)
            summary.seconds = time.monotonic() - started
            echo(summary.render())
            if reconcile_out is not None:
                on_store = metadata
                stage = demo_reconcile.Services(
                    marker_address=f"127.0.0.1:{marker.port}",
                    env={
                        **merged_system_env(model, reconcile_min_age)["deleter"],
                        **metadata.service_env(),
                    },
                    settle=lambda: follow(deleter.port, metrics_port, echo, timeout),
                    read_back=lambda: read_back(model, on_store, s3),
                )
                summary.reconciler = await demo_reconcile.reconcile_stage(
                    model,
                    reconcile_target(metadata, model.spec, s3, reconcile_min_age),
                    reconcile_out,
                    stage,
                    echo,
                    seeded_at=started if seeded_at is None else seeded_at,
                    neighbour=neighbour,
                )
                if props is not None:
                    after = await read_back(model, metadata, s3)
                    summary.reconciler.problems += props.after_reconciler_problems(
                        after, summary.reconciler.proposed_ids
                    )
                summary.problems += summary.reconciler.problems
                echo(summary.reconciler.render())
        finally:
            for service in services:
                await service.stop()
    return summary


async def read_back(model: ClusterModel, metadata: DemoMetadata, s3: S3Locations) -> ReadBack:
    """The cluster as it is now: ledgers at any path, objects in every bucket used."""
    buckets = tuple(sorted({o.bucket for o in model.objects.values()}))
    async with (
        metadata.cluster(model.spec.ledgers_root) as store,
        open_object_stores(s3.client_config(), s3.routes()) as objects,
    ):
        return await read_cluster(
            store, ledgers_root=model.spec.ledgers_root, s3_client=objects, buckets=buckets
        )


async def _standalone(spec: ClusterSpec) -> None:
    with ZooKeeperServer() as zookeeper, S3Server() as s3:
        print(f"ZooKeeper on {zookeeper.address}, S3 on {s3.endpoint}")
        model = await simulate_into(spec, zookeeper=zookeeper.address, s3_config=s3.client_config())
        print(f"seeded {len(model.managed_ledgers)} managed ledgers, {len(model.ledgers)} ledgers")
        await trim_and_delete(model, zookeeper=zookeeper, s3=S3Locations(s3), echo=print)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int, default=5, help="topics per namespace")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", choices=("default", "legacy"), default="legacy")
    args = parser.parse_args()
    make = legacy_spec if args.profile == "legacy" else ClusterSpec
    asyncio.run(_standalone(make(seed=args.seed, topics_per_namespace=args.topics)))
