"""`tombstone health`: ask a service's gRPC health endpoint whether it is serving.

Container healthchecks run it (`grpc_health_probe` is not on PyPI, and the image already has
grpcio-health-checking). Exit code 0 when the service answers SERVING, 1 otherwise: a
refused connection, a timeout and NOT_SERVING (a service draining after SIGTERM) all count
as unhealthy.

`--readiness` (the default) asks whether the service can do its work now: NOT_SERVING while
it is paused on an outage or holds publishing. `--liveness` asks only whether the process
serves; use it where a failed check restarts the process (see docs/operations.md, "Probes").
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta

import click
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.core.click_types import Duration
from services.core.grpc_server import LIVENESS, READINESS


async def check_health(address: str, *, service: str = "", timeout: float = 3.0) -> str:
    """The status name the server at `address` reports for `service` ("" = the whole server),
    or `UNREACHABLE: <why>` when no answer came within `timeout` seconds."""
    async with aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            response = await stub.Check(
                health_pb2.HealthCheckRequest(service=service), timeout=timeout
            )
        except aio.AioRpcError as exc:
            return f"UNREACHABLE: {exc.code().name} {exc.details() or ''}".rstrip()
    name: str = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
    return name


@click.command()
@click.option(
    "--address", default="127.0.0.1:50051", show_default=True, help="Service gRPC host:port."
)
@click.option(
    "--liveness",
    "check",
    flag_value=LIVENESS,
    help="Ask only whether the process serves (SERVING through dependency outages).",
)
@click.option(
    "--readiness",
    "check",
    flag_value=READINESS,
    help="Ask whether the service can work now (the default).",
)
@click.option(
    "--service",
    default="",
    help="Ask about one health service name instead, e.g. tombstone.v1.Marker.",
)
@click.option(
    "--timeout",
    type=Duration(timedelta(milliseconds=100), timedelta(seconds=60)),
    default="3s",
    show_default=True,
    help="How long to wait for the answer: a duration (500ms, 3s, or plain seconds), 100ms-60s.",
)
def health(address: str, check: str | None, service: str, timeout: timedelta) -> None:
    """Exit 0 if the gRPC service at ADDRESS reports SERVING (for container healthchecks)."""
    if check is not None and service:
        raise click.UsageError("--service names the check itself: drop --liveness/--readiness")
    # No flag asks "" which answers like `readiness`: the meaning this command always had.
    service = check or service
    status = asyncio.run(check_health(address, service=service, timeout=timeout.total_seconds()))
    click.echo(f"{address}: {status}")
    sys.exit(0 if status == "SERVING" else 1)
