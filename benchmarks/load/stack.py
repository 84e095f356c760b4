"""Where the suite runs: the devstack started here (every part a child process on free ports),
or the addresses of a running stack such as the Compose one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.healthcheck import check_health

ROOT = Path(__file__).resolve().parents[2]
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


class ServiceProcess:
    """`python -m services.<name>` with its own environment, logging to a file."""

    def __init__(
        self,
        name: str,
        env: Mapping[str, str],
        port: int,
        log_dir: Path,
        args: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.args = args or ("-m", f"services.{name}")
        """Arguments after the interpreter (default `-m services.<name>`)."""
        self.env = dict(env)
        self.port = port
        self.log = log_dir / f"{name}.log"
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, timeout: float = 60.0) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, *self.args,
                cwd=ROOT, env={**base, **self.env}, stdout=out, stderr=asyncio.subprocess.STDOUT,
            )  # fmt: skip
        await self._wait_serving(timeout)

    async def _wait_serving(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if self.process is not None and self.process.returncode is not None:
                raise RuntimeError(f"{self.name} exited: see {self.log}")
            if await check_health(self.address, timeout=1.0) == "SERVING":
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"{self.name} not serving within {timeout}s: see {self.log}")

    async def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> int | None:
        """Signal the process and wait for it (SIGKILL after `timeout`); its exit code."""
        process = self.process
        if process is None or process.returncode is not None:
            return None if process is None else process.returncode
        process.send_signal(sig)
        try:
            return await asyncio.wait_for(process.wait(), timeout)
        except TimeoutError:
            process.kill()
            return await process.wait()

    async def restart(self, sig: signal.Signals = signal.SIGTERM) -> None:
        await self.stop(sig)
        self.restarts += 1
        await self.start()


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
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
    }


def service_envs(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, ports: Mapping[str, int]
) -> dict[str, dict[str, str]]:
    """Each service's TOMBSTONE_* environment for the local stack."""
    verifier = f"127.0.0.1:{ports['verifier']}"
    pulsar = {
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
    }
    return {
        "verifier": {
            **_common_env(zk, ports["verifier"]),
            **s3.service_env(allowed_buckets=[BUCKET]),
            "TOMBSTONE_VERIFIER_CLUSTER_NAME": CLUSTER,
        },
        "marker": {
            **_common_env(zk, ports["marker"]),
            **pulsar,
            "TOMBSTONE_MARKER_ID": "load-marker",
            "TOMBSTONE_MARKER_CLUSTER": CLUSTER,
            # Shorter than the 5 s default so a short run measures deletion, not waiting.
            "TOMBSTONE_MARKER_DELIVERY_DELAY": "1s",
            "TOMBSTONE_VERIFIER_ADDRESS": verifier,
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
async def local_stack() -> AsyncIterator[LocalStack]:
    """ZooKeeper, moto S3, the devstack broker, then the verifier, marker and deleter; every
    part stopped on exit."""
    log_dir = Path(tempfile.mkdtemp(prefix="tombstone-load-"))
    with contextlib.ExitStack() as servers:
        zk = servers.enter_context(ZooKeeperServer())
        s3 = servers.enter_context(S3Server())
        broker = PulsarBrokerProcess()
        await asyncio.to_thread(broker.start)
        servers.callback(broker.stop)
        for topic in (SYSTEM_TOPIC, f"{SYSTEM_TOPIC}-RETRY", f"{SYSTEM_TOPIC}-DLQ"):
            await asyncio.to_thread(broker.control.create_partitioned_topic, topic, PARTITIONS)
        ports = {name: free_port() for name in ("verifier", "marker", "deleter")}
        envs = service_envs(zk, s3, broker, ports)
        services = {
            name: ServiceProcess(name, envs[name], ports[name], log_dir)
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
