"""Real service processes on 0.0.0.0: refused in one line with exit code 2 when nothing
authenticates callers; when auth is explicitly off, serving with a warning and the gauge at 1.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from devstack.ports import free_port
from devstack.s3 import S3Server
from devstack.services import ServiceProcess
from devstack.zookeeper import ZooKeeperServer
from services.core.env_cli import SERVICES
from services.core.service_main import EXIT_REFUSED
from services.healthcheck import check_health
from services.metadata.layout import format_ledgers_root
from services.metadata.zookeeper.store import ZkMetadataStore
from tests.helpers import ROOT

HANG_GUARD = 120.0
"""Only ends a process that hangs; the refusal itself takes about a second."""


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_exposed_without_auth_is_refused_in_one_line_with_exit_2(service: str) -> None:
    """Refused before any dependency is contacted: ZooKeeper, Pulsar, S3 and the verifier all
    point at one listening socket, which no connection reaches (a process that did connect
    would wait there for an answer, and the hang guard would end it)."""
    with socket.socket() as trap:
        trap.bind(("127.0.0.1", 0))
        trap.listen()
        trap.setblocking(False)
        here = f"127.0.0.1:{trap.getsockname()[1]}"
        done = _serve_exposed(service, here)
        with pytest.raises(BlockingIOError):
            trap.accept()  # nobody connected
    expected = (
        EXIT_REFUSED,
        [
            f"{service}: refusing to start: TOMBSTONE_AUTH_ENABLED: the gRPC server would "
            "listen on 0.0.0.0 (TOMBSTONE_GRPC_HOST), which is not loopback, with no "
            "authentication; set TOMBSTONE_AUTH_TOKENS or TOMBSTONE_AUTH_TOKENS_FILE, bind "
            "127.0.0.1, or set TOMBSTONE_AUTH_ENABLED=false explicitly"
        ],
        "",
    )
    assert expected == (done.returncode, done.stderr.splitlines(), done.stdout)


def _serve_exposed(service: str, dependencies: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
    env.update(
        TOMBSTONE_GRPC_HOST="0.0.0.0",
        TOMBSTONE_GRPC_PORT="0",
        TOMBSTONE_METRICS_PORT="0",
        TOMBSTONE_ZOOKEEPER_SERVERS=dependencies,
        TOMBSTONE_PULSAR_SERVICE_URL=f"pulsar://{dependencies}",
        TOMBSTONE_DELETER_PULSAR_ADMIN_URL=f"http://{dependencies}",
        TOMBSTONE_S3_ENDPOINT_URL=f"http://{dependencies}",
        TOMBSTONE_VERIFIER_ADDRESS=dependencies,
    )
    return subprocess.run(
        [sys.executable, "-m", "services", service, "serve"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )


async def scrape(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return await response.text()


async def test_a_verifier_with_auth_explicitly_off_serves_warns_and_exports_the_gauge(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """On 0.0.0.0 with TOMBSTONE_AUTH_ENABLED=false and no tokens, the verifier starts,
    logs `auth_disabled_on_exposed_address` with its host and port (again after a restart),
    answers SERVING, and its /metrics says `tombstone_auth_disabled_exposed 1.0`."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await format_ledgers_root(store)
    metrics_port = free_port()
    env = {
        "TOMBSTONE_GRPC_HOST": "0.0.0.0",
        "TOMBSTONE_AUTH_ENABLED": "false",
        "TOMBSTONE_METRICS_PORT": str(metrics_port),
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "1m",
        **s3.service_env(allowed_buckets=["offload"]),
    }
    verifier = ServiceProcess("services.verifier", tmp_path / "verifier.log", env=env)
    try:
        ready = await verifier.start()
        warning = await verifier.wait_for("auth_disabled_on_exposed_address", timeout=1)
        status = await check_health(verifier.address)
        body = await scrape(metrics_port)
        again = await verifier.restart()
        repeated = await verifier.wait_for("auth_disabled_on_exposed_address", timeout=1)
    finally:
        await verifier.stop(signal.SIGKILL)
    expected = ("warning", "0.0.0.0", ready["port"], False, "SERVING", True, again["port"])
    actual = (
        warning["level"],
        warning["host"],
        warning["port"],
        ready["auth"],
        status,
        "tombstone_auth_disabled_exposed 1.0" in body.splitlines(),
        repeated["port"],
    )
    assert expected == actual
