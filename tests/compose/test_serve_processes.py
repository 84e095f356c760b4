"""The commands the Compose file runs (`tombstone <service> serve`) start serving with their
settings from TOMBSTONE_* variables and exit 0 on SIGTERM (what `docker compose stop` sends)."""

from __future__ import annotations

import signal
from pathlib import Path

from benchmarks.load.stack import PARTITIONS, SYSTEM_TOPIC, service_envs
from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.services import ServiceProcess
from devstack.zookeeper import ZooKeeperServer
from services.healthcheck import check_health
from services.metadata.layout import format_ledgers_root
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic.setup import SetupPlan, prepare_topics
from tests.compose.stack_files import TOMBSTONE_SERVICES, compose


async def test_serve_commands_start_and_stop_cleanly(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """Verifier, marker and deleter, started in the Compose file's order with its commands,
    each answer SERVING; SIGTERM in reverse order ends each with exit code 0."""
    prepare_topics(SetupPlan.for_topic(broker.admin_url, SYSTEM_TOPIC, PARTITIONS))
    async with ZkMetadataStore.connect(zk.address) as store:
        await format_ledgers_root(store)  # what a formatted cluster holds (LAYOUT and all)
    ports = {name: free_port() for name in TOMBSTONE_SERVICES}
    envs = service_envs(zk, s3, broker, ports)
    order = ("verifier", "marker", "deleter")
    processes = [
        ServiceProcess(
            "services.cli", tmp_path / f"{name}.log", env=envs[name], args=_command(name)
        )
        for name in order
    ]
    statuses = []
    try:
        for process in processes:
            await process.start()
            statuses.append(await check_health(process.address))
    finally:
        codes = [await process.stop(signal.SIGTERM) for process in reversed(processes)]
    assert (statuses, codes) == (["SERVING"] * 3, [0, 0, 0])


def _command(service: str) -> list[str]:
    command: list[str] = compose()["services"][service]["command"]
    return command
