"""`python -m services.deleter` as a real process, logging JSON lines to a file."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from tests.deleter.stack import BUCKET, PARTITIONS

ROOT = Path(__file__).resolve().parents[2]


def deleter_env(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str, **extra: str
) -> dict[str, str]:
    s3_settings = s3.client_config()
    env = {
        "TOMBSTONE_GRPC_PORT": "0",
        "TOMBSTONE_METRICS_PORT": "0",  # off: its default port is fixed
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_S3_ENDPOINT_URL": s3_settings["endpoint_url"],
        "TOMBSTONE_S3_REGION": s3_settings["region_name"],
        "TOMBSTONE_S3_ACCESS_KEY_ID": s3_settings["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": s3_settings["aws_secret_access_key"],
        "TOMBSTONE_S3_ALLOWED_BUCKETS": BUCKET,
        "TOMBSTONE_VERIFIER_ADDRESS": verifier,
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_DELETER_RETRY_INITIAL_DELAY": "100ms",
        "TOMBSTONE_DELETER_RETRY_MAX_DELAY": "1s",
        "TOMBSTONE_DELETER_MAX_RETRIES": "4",
        "TOMBSTONE_DELETER_DRAIN_TIMEOUT": "3s",
    }
    env.update(extra)
    return env


class DeleterProcess:
    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log

    @classmethod
    async def start(cls, env: dict[str, str], log: Path) -> DeleterProcess:
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "services.deleter",
                cwd=ROOT,
                env={
                    **{k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")},
                    **env,
                },
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
        return cls(process, log)

    def events(self) -> list[dict[str, Any]]:
        records = []
        for line in self.log.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return records

    async def wait_for(self, event: str, timeout: float = 30.0) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            for record in self.events():
                if record.get("event") == event:
                    return record
            if self.process.returncode is not None:
                raise AssertionError(f"deleter exited ({self.process.returncode}): {self.tail()}")
            await asyncio.sleep(0.1)
        raise AssertionError(f"no {event} within {timeout}s: {self.tail()}")

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-20:])

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


async def cli(*args: str) -> tuple[int, str]:
    """Run `tombstone <args>` in a child process; its exit code and output."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.cli",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()
