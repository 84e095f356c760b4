"""The trim-and-delete stage of the local demo: broker, verifier, marker and deleter as real
processes; every simulated topic trimmed through the marker; progress until the deleter has
settled everything; a summary.

`devstack/demo.py` calls `trim_and_delete(...)` after seeding the cluster. On its own:

    .venv/bin/python -m devstack.demo_pipeline [--topics 5]

starts ZooKeeper and S3 too and seeds a cluster first.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grpc import aio

from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.services import ServiceProcess, signing_envs
from devstack.simulator.model import ClusterModel
from devstack.simulator.readback import read_cluster
from devstack.simulator.run import simulate_into
from devstack.simulator.s3 import open_object_store
from devstack.simulator.spec import ClusterSpec
from devstack.simulator.trim import TrimmedLedger, trim
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore
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
    unlinked: list[TrimmedLedger] = field(default_factory=list)
    """The ledgers the marker unlinked, with what the protocol must delete of each."""
    problems: list[str] = field(default_factory=list)
    """S1/L1 violations found by the final check; empty when the run was correct."""

    def render(self) -> str:
        def fmt(counts: dict[str, int]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"

        return "\n".join(
            [
                f"marked: {self.ledgers_marked} ledgers ({self.pdlis_sent} PDLIs), "
                f"{self.not_marked} not marked",
                f"deleted: {fmt(self.deleted)}",
                f"skipped: {fmt(self.skipped)}",
                f"dead-lettered: {fmt(self.dead_lettered)}",
                f"time: {self.seconds:.1f}s",
                "check: "
                + (
                    "S1 and L1 hold (what the protocol unlinked is gone, everything else is kept)"
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


def _common_env(
    zookeeper: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> dict[str, str]:
    return {
        "TOMBSTONE_ZOOKEEPER_SERVERS": zookeeper.address,
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        **s3.service_env(),
    }


async def start_services(
    model: ClusterModel,
    zookeeper: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    workdir: Path,
) -> tuple[ServiceProcess, ServiceProcess, ServiceProcess, int]:
    """Verifier, marker and deleter processes; returns them and the deleter's metrics port."""
    common = _common_env(zookeeper, s3, broker)
    marker_signing, verifier_signing = signing_envs()
    buckets = ",".join(sorted({o.bucket for o in model.objects.values()}) or [model.spec.bucket])
    verifier = await _start(
        "verifier",
        {
            **common,
            "TOMBSTONE_S3_ALLOWED_BUCKETS": buckets,
            "TOMBSTONE_VERIFIER_CLUSTER_NAME": model.spec.cluster_name,
            **verifier_signing,
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
            **marker_signing,
            # Shorter than the deleter's retry budget below (17.6 s at least), which the
            # services check against each other at start (services.core.peer_settings).
            "TOMBSTONE_MARKER_RETRY_WINDOW": "10s",
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
            "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
            "TOMBSTONE_METRICS_PORT": str(metrics_port),
            "TOMBSTONE_DELETER_ID": "demo-deleter",
            "TOMBSTONE_DELETER_RETRY_MAX_DELAY": "5s",
            "TOMBSTONE_DELETER_MAX_RETRIES": "6",
        },
        workdir,
    )
    return verifier, marker, deleter, metrics_port


async def trim_all(model: ClusterModel, marker_port: int, summary: Summary, echo: Echo) -> None:
    """What the brokers' retention would do: each topic drops all but its current ledger,
    through the marker's MarkLedgers. Shadow topics are trimmed by their source."""
    async with aio.insecure_channel(f"127.0.0.1:{marker_port}") as channel:
        stub = _mk_grpc.MarkerStub(channel)
        for ml in model.managed_ledgers.values():
            if len(ml.ledger_ids) < 2 or ml.shadow_source:
                continue
            expected = trim(model, ml.name, len(ml.ledger_ids) - 1)
            request = _mk.MarkLedgersRequest(
                component=_pd.MANAGED_LEDGER,
                managed_ledger_name=ml.name,
                ledger_ids=expected.ledger_ids,
            )
            response = await stub.MarkLedgers(request, timeout=60)
            marked = {m.ledger_id for m in response.marked}
            summary.unlinked += [t for t in expected.trimmed if t.ledger_id in marked]
            summary.ledgers_marked += len(response.marked)
            summary.pdlis_sent += response.pdlis_sent
            summary.not_marked += len(response.not_marked)
    echo(
        f"trimmed through the marker: {summary.ledgers_marked} ledgers, {summary.pdlis_sent} PDLIs"
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
    zookeeper: ZooKeeperServer,
    s3: S3Server,
    echo: Echo,
    timeout: float = 300,
) -> Summary:
    """Run the stage against an already seeded cluster; returns its summary."""
    summary = Summary()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, PulsarBrokerProcess() as broker:
        echo(f"Pulsar (devstack broker) on {broker.service_url}")
        for topic in (SYSTEM_TOPIC, f"{SYSTEM_TOPIC}-RETRY", f"{SYSTEM_TOPIC}-DLQ"):
            broker.control.create_partitioned_topic(topic, PARTITIONS)
        services: list[ServiceProcess] = []
        try:
            verifier, marker, deleter, metrics_port = await start_services(
                model, zookeeper, s3, broker, Path(tmp)
            )
            services = [deleter, marker, verifier]
            echo(f"verifier :{verifier.port}  marker :{marker.port}  deleter :{deleter.port}")
            await trim_all(model, marker.port, summary, echo)
            await follow(deleter.port, metrics_port, echo, timeout)
            counts = await asyncio.to_thread(_counters, metrics_port)
            summary.deleted = counts["deleted"]
            summary.skipped = counts["skipped"]
            summary.dead_lettered = counts["dead_lettered"]
        finally:
            for service in services:
                await service.stop()
    summary.problems = await check_outcome(model, summary.unlinked, zookeeper, s3)
    summary.seconds = time.monotonic() - started
    echo(summary.render())
    return summary


async def check_outcome(
    model: ClusterModel, unlinked: list[TrimmedLedger], zookeeper: ZooKeeperServer, s3: S3Server
) -> list[str]:
    """Read the cluster back. L1: the tiers the protocol targets for every unlinked ledger are
    gone. S1: everything else that was there before the run is still there, including the
    ledgers a shadow topic still lists (the planted orphans are the reconciler's to remove)."""
    buckets = tuple(sorted({o.bucket for o in model.objects.values()}))
    async with (
        ZkMetadataStore.connect(zookeeper.address) as store,
        open_object_store(s3.client_config()) as objects,
    ):
        now = await read_cluster(
            store, ledgers_root=model.spec.ledgers_root, s3_client=objects, buckets=buckets
        )
    gone_ledgers = {
        t.ledger_id for t in unlinked if t.delete_from_bookkeeper and not t.still_referenced
    }
    gone_keys = {key for t in unlinked if not t.still_referenced for key in t.object_keys}
    problems = [
        f"L1: unlinked ledger {i} is still in BookKeeper" for i in gone_ledgers & set(now.ledgers)
    ]
    problems += [
        f"L1: object {key} of an unlinked ledger remains" for key in gone_keys & set(now.objects)
    ]
    kept = {led.ledger_id for led in model.bookkeeper_ledgers()} - gone_ledgers
    problems += [f"S1: ledger {i} was deleted" for i in sorted(kept - set(now.ledgers))]
    problems += [
        f"S1: object {k} was deleted"
        for k in sorted(set(model.objects) - gone_keys - set(now.objects))
    ]
    return problems


async def _standalone(spec: ClusterSpec) -> None:
    with ZooKeeperServer() as zookeeper, S3Server() as s3:
        print(f"ZooKeeper on {zookeeper.address}, S3 on {s3.endpoint}")
        model = await simulate_into(spec, zookeeper=zookeeper.address, s3_config=s3.client_config())
        print(f"seeded {len(model.managed_ledgers)} managed ledgers, {len(model.ledgers)} ledgers")
        await trim_and_delete(model, zookeeper=zookeeper, s3=s3, echo=print)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topics", type=int, default=5, help="topics per namespace")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    asyncio.run(_standalone(ClusterSpec(seed=args.seed, topics_per_namespace=args.topics)))
