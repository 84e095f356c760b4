"""The chaos stack: one ZooKeeper, one moto S3 and one devstack broker (with a data directory,
so a restart keeps the topics and their messages) shared by every run, with the services
reaching ZooKeeper and S3 through fault proxies; the marker, the verifier and two deleters as
child processes on fixed ports, so a restarted one is found where it was.

Signed intents are on (the marker signs, the verifier requires signatures)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.load.stack import BUCKET, PARTITIONS, SYSTEM_TOPIC, service_envs
from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.s3_faults import S3FaultProxy
from devstack.services import ServiceProcess
from devstack.zk_faults import ZooKeeperFaultProxy
from devstack.zookeeper import ZooKeeperServer
from services.metadata.layout import format_ledgers_root
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic.setup import SetupPlan, prepare_topics

DELETERS = ("deleter-a", "deleter-b")
SERVICES = ("verifier", "marker", *DELETERS)
SESSION_TIMEOUT_S = 4
"""The services' ZooKeeper session timeout: a proxy cut longer than this expires sessions."""
FOREIGN_BUCKET = "chaos-foreign"
"""A bucket no service may touch; look-alike objects are planted there too."""


@dataclass
class ChaosStack:
    zookeeper: ZooKeeperServer
    zk_proxy: ZooKeeperFaultProxy
    s3: S3Server
    s3_proxy: S3FaultProxy
    broker: PulsarBrokerProcess
    services: dict[str, ServiceProcess]
    log_dir: Path

    @property
    def marker_address(self) -> str:
        return self.services["marker"].address

    async def ensure_running(self) -> list[str]:
        """Start every service that is not running (a crash, or one killed by a fault);
        returns the names restarted."""
        started = []
        for name, service in self.services.items():
            if not service.running:
                await service.stop()  # reap it
                await service.start()
                started.append(name)
        return started


def _envs(stack_parts: tuple[ZooKeeperServer, S3Server, PulsarBrokerProcess],
          zk_proxy: ZooKeeperFaultProxy, s3_proxy: S3FaultProxy,
          ports: dict[str, int]) -> dict[str, dict[str, str]]:  # fmt: skip
    zk, s3, broker = stack_parts
    base = service_envs(zk, s3, broker, {**ports, "deleter": ports[DELETERS[0]]})
    through_proxies = {
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk_proxy.address,
        "TOMBSTONE_ZOOKEEPER_SESSION_TIMEOUT": f"{SESSION_TIMEOUT_S}s",
    }
    envs: dict[str, dict[str, str]] = {}
    for name in SERVICES:
        env = dict(base["deleter" if name in DELETERS else name])
        env.update(through_proxies)
        if "TOMBSTONE_S3_ENDPOINT_URL" in env:
            env["TOMBSTONE_S3_ENDPOINT_URL"] = s3_proxy.endpoint
        if name in DELETERS:
            env["TOMBSTONE_DELETER_ID"] = f"chaos-{name}"
            env["TOMBSTONE_GRPC_PORT"] = str(ports[name])
        envs[name] = env
    return envs


@contextlib.asynccontextmanager
async def chaos_stack() -> AsyncIterator[ChaosStack]:
    """Every part started; every part stopped on exit."""
    log_dir = Path(tempfile.mkdtemp(prefix="tombstone-chaos-"))
    with contextlib.ExitStack() as servers:
        zk = servers.enter_context(ZooKeeperServer())
        s3 = servers.enter_context(S3Server())
        broker = PulsarBrokerProcess(data_dir=log_dir / "broker-data")
        await asyncio.to_thread(broker.start)
        servers.callback(broker.close)
        plan = SetupPlan.for_topic(broker.admin_url, SYSTEM_TOPIC, PARTITIONS)
        await asyncio.to_thread(prepare_topics, plan)
        async with ZkMetadataStore.connect(zk.address) as store:
            await format_ledgers_root(store)
        async with (
            ZooKeeperFaultProxy(zk.host, zk.port) as zk_proxy,
            S3FaultProxy(s3.endpoint) as s3_proxy,
        ):
            ports = {name: free_port() for name in SERVICES}
            envs = _envs((zk, s3, broker), zk_proxy, s3_proxy, ports)
            module = {name: "deleter" if name in DELETERS else name for name in SERVICES}
            services = {
                name: ServiceProcess(
                    f"services.{module[name]}",
                    log_dir / f"{name}.log",
                    env=envs[name],
                    stop_timeout=15.0,
                )
                for name in SERVICES
            }
            try:
                for service in services.values():
                    await service.start()
                yield ChaosStack(zk, zk_proxy, s3, s3_proxy, broker, services, log_dir)
            finally:
                for service in reversed(services.values()):
                    await service.stop()


__all__ = ["BUCKET", "FOREIGN_BUCKET", "SYSTEM_TOPIC", "ChaosStack", "chaos_stack"]
