"""The services `--submit` talks to in the e2e tests: the marker behind its real gRPC
service, the verifier it asks and the deleter that acts on what it marked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.config import ClientConfig, GrpcServerConfig
from services.core.grpc_server import ServiceRunner
from services.deleter.admin import Status
from services.marker.app import METHOD_ROLES
from services.marker.marking import Marker
from services.marker.servicer import SERVICE_NAME, MarkerServicer
from services.scan.submit.send import SubmitReport, SubmitSettings, submit
from tests.deleter.stack import (
    deleter_config,
    drained,
    running_deleter,
    running_marker,
    running_verifier,
)
from tests.store_kinds import StoreKind
from tombstone.v1 import marker_pb2_grpc as _mk_grpc


@asynccontextmanager
async def marker_server(marker: Marker) -> AsyncIterator[str]:
    """The marker's gRPC service on a free port; yields its address."""
    async with ServiceRunner(
        name="marker",
        grpc=GrpcServerConfig(port=0),
        method_roles=METHOD_ROLES,
        handle_signals=False,
    ) as runner:
        servicer = MarkerServicer(marker, max_batch=10_000)
        runner.add_servicer(_mk_grpc.add_MarkerServicer_to_server, servicer, SERVICE_NAME)
        port = await runner.start()
        try:
            yield f"127.0.0.1:{port}"
        finally:
            await runner.shutdown()


async def submit_and_delete(
    candidates: list[dict[str, Any]],
    zk: ZooKeeperServer | StoreKind,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    *,
    seen_at_ms: int = 0,
    **verifier_overrides: Any,
) -> tuple[SubmitReport, Status]:
    """Submit `candidates` to a marker over gRPC (its verifier takes `verifier_overrides` as
    config fields), then run a deleter until it has drained what was marked, all on `zk`'s
    metadata store (the session's ZooKeeper, or either kind), the calls stamped with
    `seen_at_ms`. Returns the submit's report and the deleter's status then."""
    async with running_verifier(zk, s3, **verifier_overrides) as verifier:
        async with running_marker(zk, broker, verifier) as marker, marker_server(marker) as address:
            settings = SubmitSettings(marker=ClientConfig(address))
            report = await submit(candidates, settings, seen_at_ms=seen_at_ms)
        async with running_deleter(deleter_config(zk, s3, broker, verifier)) as running:
            status = await drained(running.deleter)
    return report, status
