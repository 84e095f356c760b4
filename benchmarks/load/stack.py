"""Where the suite runs: the devstack started here (every part a child process on free ports),
or the addresses of a running stack such as the Compose one."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.services import ServiceProcess, signing_envs
from devstack.zookeeper import ZooKeeperServer
from services.metadata.layout import format_ledgers_root
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic.setup import SetupPlan, prepare_topics

SYSTEM_TOPIC = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 4


@dataclass(frozen=True)
class Endpoints:
    """What the load generator talks to."""

    zookeeper: str
    """ZooKeeper connect string (the cluster's metadata store)."""
    s3: Mapping[str, str]
    """aiobotocore `create_client("s3", **s3)` arguments."""
    bucket: str
    """The offload bucket (one the services may touch)."""
    cluster: str
    """Pulsar cluster name the offloaded objects carry (the verifier's cluster name)."""
    marker: str
    """Marker `host:port`."""
    marker_token: str | None = field(default=None, repr=False)
    """Bearer token with the broker role, when the marker requires one."""


@dataclass
class LocalStack:
    """The devstack's parts, started by `local_stack()`."""

    endpoints: Endpoints
    zookeeper: ZooKeeperServer
    s3: S3Server
    broker: PulsarBrokerProcess
    services: dict[str, ServiceProcess]
    log_dir: Path


CLUSTER = "standalone"
BUCKET = "pulsar-offload"


def _common_env(zk: ZooKeeperServer, port: int) -> dict[str, str]:
    return {
        "TOMBSTONE_GRPC_PORT": str(port),
        "TOMBSTONE_METRICS_PORT": "0",
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
    }


FOLLOW_ENV = {"TOMBSTONE_MARKER_FOLLOW": "true"}
"""Runs the marker's follower, which turns every unlink an unmodified broker makes into
intents (source OBSERVED)."""


def service_envs(
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    ports: Mapping[str, int],
    *,
    follow: bool = False,
) -> dict[str, dict[str, str]]:
    """Each service's TOMBSTONE_* environment for the local stack; `follow` turns the
    marker's follower on (broker-style runs)."""
    verifier = f"127.0.0.1:{ports['verifier']}"
    marker_signing, verifier_signing = signing_envs()
    pulsar = {
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
    }
    return {
        "verifier": {
            **_common_env(zk, ports["verifier"]),
            **s3.service_env(allowed_buckets=[BUCKET]),
            "TOMBSTONE_VERIFIER_CLUSTER_NAME": CLUSTER,
            **verifier_signing,
        },
        "marker": {
            **_common_env(zk, ports["marker"]),
            **pulsar,
            "TOMBSTONE_MARKER_ID": "load-marker",
            "TOMBSTONE_MARKER_CLUSTER": CLUSTER,
            # Shorter than the 5 s default so a short run measures deletion, not waiting.
            "TOMBSTONE_MARKER_DELIVERY_DELAY": "1s",
            # Shorter than the deleter's retry budget below (30 s at least), which the
            # services check against each other at start (services.metadata.peer_settings).
            "TOMBSTONE_MARKER_RETRY_WINDOW": "20s",
            "TOMBSTONE_VERIFIER_ADDRESS": verifier,
            **marker_signing,
            **(FOLLOW_ENV if follow else {}),
        },
        "deleter": {
            **_common_env(zk, ports["deleter"]),
            **pulsar,
            **s3.service_env(allowed_buckets=[BUCKET]),
            "TOMBSTONE_DELETER_ID": "load-deleter",
            "TOMBSTONE_VERIFIER_ADDRESS": verifier,
            "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
            "TOMBSTONE_DELETER_RETRY_INITIAL_DELAY": "500ms",
            "TOMBSTONE_DELETER_RETRY_MAX_DELAY": "5s",
            "TOMBSTONE_DELETER_DRAIN_TIMEOUT": "5s",
        },
    }


@contextlib.asynccontextmanager
async def local_stack(*, follow: bool = False) -> AsyncIterator[LocalStack]:
    """ZooKeeper, moto S3, the devstack broker, then the verifier, marker (with its follower
    when `follow`) and deleter; every part stopped on exit."""
    log_dir = Path(tempfile.mkdtemp(prefix="tombstone-load-"))
    with contextlib.ExitStack() as servers:
        zk = servers.enter_context(ZooKeeperServer())
        s3 = servers.enter_context(S3Server())
        broker = PulsarBrokerProcess()
        await asyncio.to_thread(broker.start)
        servers.callback(broker.stop)
        plan = SetupPlan.for_topic(broker.admin_url, SYSTEM_TOPIC, PARTITIONS)
        await asyncio.to_thread(prepare_topics, plan)
        # The verifier and the deleter refuse to start without a ledgers root and LAYOUT.
        async with ZkMetadataStore.connect(zk.address) as store:
            await format_ledgers_root(store)
        ports = {name: free_port() for name in ("verifier", "marker", "deleter")}
        envs = service_envs(zk, s3, broker, ports, follow=follow)
        services = {
            name: ServiceProcess(
                f"services.{name}", log_dir / f"{name}.log", env=envs[name], stop_timeout=30.0
            )
            for name in ("verifier", "marker", "deleter")
        }
        try:
            for service in services.values():
                await service.start()
            endpoints = Endpoints(
                zookeeper=zk.address,
                s3=s3.client_config(),
                bucket=BUCKET,
                cluster=CLUSTER,
                marker=services["marker"].address,
            )
            yield LocalStack(endpoints, zk, s3, broker, services, log_dir)
        finally:
            for service in reversed(services.values()):
                await service.stop()
