"""`python -m services.marker` against the secured devstack broker: with OAuth2 over TLS it
starts and its subscription check passes; with a credential the broker refuses it stops at
with one line naming the plugin (exit 2), not with the client's timeout."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.systopic.setup import SetupPlan, prepare_topics
from tests.helpers import READ_TIMEOUT, ROOT, LoggedProcess

PARTITIONS = 2


def marker_env(
    zookeeper: ZooKeeperServer, broker: PulsarBrokerProcess, journal: Path, auth: str
) -> dict[str, str]:
    return {
        **broker.tombstone_environment(auth),
        "TOMBSTONE_GRPC_PORT": "0",
        "TOMBSTONE_METRICS_PORT": "0",
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zookeeper.address,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_PULSAR_OPERATION_TIMEOUT": "20s",
        "TOMBSTONE_MARKER_ID": "marker-secured",
        "TOMBSTONE_MARKER_JOURNAL_DIR": str(journal),
        "TOMBSTONE_MARKER_BELIEVE_ENABLED": "false",
    }


async def test_marker_starts_over_tls_with_oauth2(
    zk: ZooKeeperServer, secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    env = marker_env(zk, secure, tmp_path, "oauth2")
    await asyncio.to_thread(prepare_topics, SetupPlan.from_env(env))
    marker = await LoggedProcess.start("services.marker", env)
    try:
        present = await marker.wait_for("deleter_subscription_present")
        ready = await marker.wait_for("service_ready")
    finally:
        marker.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(marker.process.wait(), READ_TIMEOUT)
    assert (present["subscription"], int(ready["port"]) > 0) == ("tombstone-deleter", True)


async def test_marker_refused_credentials_end_the_start_in_one_line(
    zk: ZooKeeperServer, secure: PulsarBrokerProcess, tmp_path: Path
) -> None:
    forged = tmp_path / "forged.token"
    forged.write_text("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln")
    env = {
        **marker_env(zk, secure, tmp_path, "token"),
        "TOMBSTONE_PULSAR_AUTH_TOKEN_FILE": str(forged),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.marker",
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    # The line is the admin API's refusal, not the binary client's timeout (which would say
    # "dependency unavailable", exit 3).
    _, err = await asyncio.wait_for(process.communicate(), READ_TIMEOUT)
    lines = err.decode().strip().splitlines()
    assert (
        process.returncode,
        lines[-1].startswith(
            "marker: refusing to start: Pulsar "
            "refuses the credentials of TOMBSTONE_PULSAR_AUTH_PLUGIN=token"
        ),
    ) == (2, True), lines
