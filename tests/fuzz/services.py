"""The three services as real processes (`python -m services.<name>`), auth on, JSON logs.

Each service under fuzz is described by a `Surface`: its methods (full path -> request
descriptor), the roles each method admits, and the status codes its code documents besides
OK, INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED and RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.deleter.servicer import METHOD_ROLES as DELETER_ROLES
from services.marker.app import METHOD_ROLES as MARKER_ROLES
from services.verifier.servicer import METHOD_ROLES as VERIFIER_ROLES
from tests.deleter.stack import BUCKET, CLUSTER, PARTITIONS
from tests.deleter_e2e.process import deleter_env
from tombstone.v1 import deleter_pb2, marker_pb2, verifier_pb2

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("broker", "reconciler", "marker", "deleter", "admin", "operator")
START_TIMEOUT = 60.0


def _methods(file: Any, service: str) -> dict[str, Descriptor]:
    descriptor = file.DESCRIPTOR.services_by_name[service]
    return {f"/{descriptor.full_name}/{m.name}": m.input_type for m in descriptor.methods}


@dataclass(frozen=True)
class Surface:
    name: str
    module: str
    methods: dict[str, Descriptor]
    roles: Mapping[str, frozenset[str]]
    documented: frozenset[grpc.StatusCode] = frozenset()
    """Domain statuses the service's code documents (NOT_FOUND for a missing owner...)."""


SURFACES = {
    "marker": Surface(
        "marker",
        "services.marker",
        _methods(marker_pb2, "Marker"),
        {m: frozenset(r) for m, r in MARKER_ROLES.items()},
        # services/marker/servicer.py: NOT_FOUND (no such owner), ABORTED (lost CAS);
        # docs/marker.md: FAILED_PRECONDITION (owner in a state that cannot be unlinked).
        frozenset(
            {
                grpc.StatusCode.NOT_FOUND,
                grpc.StatusCode.ABORTED,
                grpc.StatusCode.FAILED_PRECONDITION,
            }
        ),
    ),
    "verifier": Surface(
        "verifier",
        "services.verifier",
        _methods(verifier_pb2, "Verifier"),
        {m: frozenset(r) for m, r in VERIFIER_ROLES.items()},
    ),
    "deleter": Surface(
        "deleter",
        "services.deleter",
        _methods(deleter_pb2, "DeleterAdmin"),
        {m: frozenset(r) for m, r in DELETER_ROLES.items()},
    ),
}


@dataclass
class Running:
    surface: Surface
    process: asyncio.subprocess.Process
    log: Path
    address: str = ""
    tokens: dict[str, str] = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                out.append(record)
        return out

    def unhandled(self) -> list[str]:
        """Log lines that show an exception the service did not map to a status."""
        found = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if "Traceback" in line:
                    found.append(line)
                continue
            if not isinstance(record, dict):
                continue
            level = str(record.get("level", "")).lower()
            if (
                record.get("event") == "rpc_internal_error"
                or level in ("error", "critical")
                or "exception" in record
            ):
                found.append(line[:2000])
        return found

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])

    def alive(self) -> bool:
        return self.process.returncode is None

    async def serving(self) -> bool:
        """The health service still answers SERVING."""
        if not self.alive():
            return False
        try:
            async with aio.insecure_channel(self.address) as channel:
                reply = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=10
                )
        except grpc.RpcError:
            return False
        return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), 20)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


def token_table() -> dict[str, str]:
    """role -> a fresh random token."""
    return {role: f"fuzz-{role}-{secrets.token_hex(8)}" for role in ROLES}


def auth_env(tokens: Mapping[str, str]) -> dict[str, str]:
    table = ";".join(f"{token} {role} fuzz-{role}" for role, token in tokens.items())
    return {"TOMBSTONE_AUTH_ENABLED": "true", "TOMBSTONE_AUTH_TOKENS": table}


def verifier_env(zk: ZooKeeperServer, s3: S3Server) -> dict[str, str]:
    client = s3.client_config()
    return {
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_S3_ENDPOINT_URL": client["endpoint_url"],
        "TOMBSTONE_S3_REGION": client["region_name"],
        "TOMBSTONE_S3_ACCESS_KEY_ID": client["aws_access_key_id"],
        "TOMBSTONE_S3_SECRET_ACCESS_KEY": client["aws_secret_access_key"],
        "TOMBSTONE_S3_ALLOWED_BUCKETS": BUCKET,
        "TOMBSTONE_VERIFIER_CLUSTER": CLUSTER,
        "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "1m",
    }


def marker_env(zk: ZooKeeperServer, broker: PulsarBrokerProcess, journal: Path) -> dict[str, str]:
    return {
        "TOMBSTONE_ZOOKEEPER_SERVERS": zk.address,
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_MARKER_ID": "fuzz-marker",
        "TOMBSTONE_MARKER_JOURNAL_DIR": str(journal),
        "TOMBSTONE_MARKER_BELIEVE_ENABLED": "false",
    }


async def start(surface: Surface, env: Mapping[str, str], log: Path) -> Running:
    """Start the service and wait for `service_ready`; fails if it exits first."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TOMBSTONE_", "AWS_"))}
    full = {**base, "TOMBSTONE_GRPC_PORT": "0", "TOMBSTONE_LOG_FORMAT": "json", **env}
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            surface.module,
            cwd=ROOT,
            env=full,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    running = Running(surface, process, log)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while loop.time() < deadline:
        for record in running.records():
            if record.get("event") == "service_ready":
                running.address = f"127.0.0.1:{record['port']}"
                return running
        if process.returncode is not None:
            break
        await asyncio.sleep(0.1)
    await running.stop()
    raise RuntimeError(f"{surface.name} did not become ready:\n{running.tail()}")


async def start_all(
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    workdir: Path,
    tokens: Mapping[str, str],
) -> dict[str, Running]:
    """The verifier, then the marker and the deleter (a client of that verifier)."""
    auth = auth_env(tokens)
    running: dict[str, Running] = {}
    try:
        verifier = await start(
            SURFACES["verifier"], {**verifier_env(zk, s3), **auth}, workdir / "verifier.log"
        )
        running["verifier"] = verifier
        journal = workdir / "journal"
        journal.mkdir(exist_ok=True)
        running["marker"] = await start(
            SURFACES["marker"], {**marker_env(zk, broker, journal), **auth}, workdir / "marker.log"
        )
        env = {
            **deleter_env(zk, s3, broker, verifier.address),
            **auth,
            "TOMBSTONE_VERIFIER_TOKEN": tokens["deleter"],
            "TOMBSTONE_DELETER_ID": "fuzz-deleter",
        }
        # The deleter's default retry budget, which the marker's retry window fits in.
        for name in ("RETRY_INITIAL_DELAY", "RETRY_MAX_DELAY", "MAX_RETRIES"):
            env.pop(f"TOMBSTONE_DELETER_{name}", None)
        running["deleter"] = await start(SURFACES["deleter"], env, workdir / "deleter.log")
    except BaseException:
        await asyncio.gather(*(r.stop() for r in running.values()))
        raise
    for item in running.values():
        item.tokens = dict(tokens)
    return running
