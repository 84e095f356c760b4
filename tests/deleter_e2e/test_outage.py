"""Outages pause the deleter, they do not burn retries (issue 12, item 6).

The real parts: ZooKeeper (Debian's server, stopped and started again), the devstack broker,
moto S3, the verifier, and the deleter as a process. The retry budget is cut to about 3.5 s
(0.5 + 1 + 1 + 1 s of backoff); the dependency stays away for 20 s, far longer (and until the
deleter has paused on it): the PDLIs fall due a few seconds into it, and more than three
budgets of outage follow. Before the pause existed, every PDLI due during such an outage ended
in the dead-letter topic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZooKeeperServer
from services.core.grpc_server import LIVENESS
from tests.deleter.stack import mark_trims, running_marker, running_verifier
from tests.deleter_e2e.checks import assert_all_gone, assert_safe
from tests.deleter_e2e.process import DeleterProcess, deleter_env
from tests.helpers import assert_eventually

OUTAGE = 20.0
"""Seconds the dependency stays away: the PDLIs fall due a few seconds into it, and more than
three retry budgets of outage follow."""
BUDGET = {
    "TOMBSTONE_DELETER_RETRY_INITIAL_DELAY": "500ms",
    "TOMBSTONE_DELETER_RETRY_MAX_DELAY": "1s",
    "TOMBSTONE_DELETER_MAX_RETRIES": "4",
    "TOMBSTONE_DELETER_OUTAGE_PROBE_INTERVAL": "500ms",
    "TOMBSTONE_ZOOKEEPER_OPERATION_TIMEOUT": "3s",
    "TOMBSTONE_ZOOKEEPER_SESSION_TIMEOUT": "6s",
}
PAUSE_TIMEOUT = 60.0
"""Seconds past OUTAGE the dependency may stay away while the deleter has not paused yet."""
DELIVERY_DELAY = timedelta(seconds=12)
"""The PDLIs fall due this long after marking: after the outage began."""
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass
class HealthLog:
    """The deleter's gRPC health, polled: (wall time, status) at each change of readiness
    (service "") and, apart, of liveness."""

    changes: list[tuple[float, int]] = field(default_factory=list)
    liveness: list[tuple[float, int]] = field(default_factory=list)

    def first(self, status: int, after: float = 0.0) -> float | None:
        return next((t for t, s in self.changes if s == status and t >= after), None)


@asynccontextmanager
async def watched_health(address: str) -> AsyncIterator[HealthLog]:
    log = HealthLog()

    async def poll() -> None:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            last: dict[str, int] = {}
            logs = {"": log.changes, LIVENESS: log.liveness}
            while True:
                for service, changes in logs.items():
                    try:
                        request = health_pb2.HealthCheckRequest(service=service)
                        status = (await stub.Check(request, timeout=2)).status
                    except grpc.aio.AioRpcError:
                        status = -1
                    if status != last.get(service):
                        changes.append((time.time(), status))
                        last[service] = status
                await asyncio.sleep(0.2)

    task = asyncio.create_task(poll())
    try:
        yield log
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def logged_at(deleter: DeleterProcess, event: str) -> list[float]:
    return [
        datetime.fromisoformat(r["timestamp"]).timestamp()
        for r in deleter.events()
        if r.get("event") == event
    ]


def count(deleter: DeleterProcess, event: str) -> int:
    return sum(1 for r in deleter.events() if r.get("event") == event)


async def run_outage(
    *,
    cluster: tuple[ClusterModel, set[str], str],
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
    dependency: str,
    stop: Callable[[], Awaitable[None]],
    start: Callable[[], Awaitable[None]],
    verifier: str,
) -> dict[str, float]:
    """Mark, start the deleter, take `dependency` away for OUTAGE seconds before the PDLIs
    fall due, bring it back; return the timeline (seconds after the stop)."""
    model, before, _ = cluster
    async with running_marker(zk, broker, verifier, delivery_delay=DELIVERY_DELAY) as marker:
        marked = await mark_trims(marker, model)
    env = deleter_env(zk, s3, broker, verifier, **BUDGET)
    deleter = await DeleterProcess.start(env, tmp_path / "deleter.log")
    try:
        ready = await deleter.wait_for("service_ready")
        address = f"127.0.0.1:{ready['port']}"
        async with watched_health(address) as health:
            stopped = time.time()
            await stop()
            assert count(deleter, "ledger_deleted") == 0  # nothing was due before the outage
            await asyncio.sleep(OUTAGE)

            async def pause_seen() -> float:
                seen = health.first(NOT_SERVING, after=stopped)
                assert seen is not None, health.changes  # NOT_SERVING during the outage
                return seen

            # A first verdict can take a verifier deadline to come back: on a loaded machine
            # the pause may follow OUTAGE, and the dependency stays away until it does.
            paused_during = await assert_eventually(pause_seen, timeout=PAUSE_TIMEOUT, interval=0.2)
            await start()
            started = time.time()
            model_, marked_ = model, marked

            async def all_gone() -> None:
                listed, _ = await assert_safe(zk, s3, model_, before)
                await assert_all_gone(zk, s3, model_, marked_, listed)

            await assert_eventually(all_gone, timeout=120, interval=1.0)
            gone = time.time()
            serving_again = health.first(SERVING, after=started)
        paused = logged_at(deleter, "deleter_paused")
        resumed = logged_at(deleter, "deleter_resumed")
        deleted = logged_at(deleter, "ledger_deleted")
        dead_letters = count(deleter, "pdli_dead_lettered")
        released = count(deleter, "message_released")
        retried = count(deleter, "pdli_retried")
    finally:
        await deleter.stop()
    timeline = {
        f"{dependency} stopped": 0.0,
        "first deleter_paused": min(paused) - stopped,
        "health NOT_SERVING seen": paused_during - stopped,
        f"{dependency} started": started - stopped,
        "last deleter_resumed": max(resumed) - stopped,
        "health SERVING again": (serving_again or float("nan")) - stopped,
        "last ledger_deleted": max(deleted) - stopped,
        "all gone (checked)": gone - stopped,
    }
    print(f"\n{dependency} outage of {OUTAGE:.0f} s, retry budget ~3.5 s:")
    for what, at in timeline.items():
        print(f"  {at:7.1f} s  {what}")
    print(
        f"  deleted {len(deleted)}, dead letters {dead_letters}, released {released}, "
        f"retried {retried}, pauses {len(paused)}"
    )
    # Readiness failed, liveness never did: a liveness probe would not have restarted it.
    assert [status for _, status in health.liveness] == [SERVING], health.liveness
    assert (dead_letters, released) == (0, 0)
    assert len(deleted) > 0
    return timeline


async def test_zookeeper_outage_longer_than_the_retry_budget_loses_nothing(
    cluster: tuple[ClusterModel, set[str], str],
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """ZooKeeper stopped for ~3x the retry budget while every PDLI falls due: the deleter
    pauses (readiness NOT_SERVING, liveness SERVING throughout), nothing is retried to death
    or released, and once ZooKeeper is back every marked ledger is deleted with zero dead
    letters, nothing listed touched."""
    _, _, verifier = cluster

    async def stop() -> None:
        await asyncio.to_thread(zk.stop)

    async def start() -> None:
        await asyncio.to_thread(zk.start)

    await run_outage(
        cluster=cluster,
        zk=zk,
        s3=s3,
        broker=broker,
        tmp_path=tmp_path,
        dependency="ZooKeeper",
        stop=stop,
        start=start,
        verifier=verifier,
    )


async def test_verifier_outage_longer_than_the_retry_budget_loses_nothing(
    cluster: tuple[ClusterModel, set[str], str],
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """The verifier stopped for ~3x the retry budget: the deleter pauses on it (connection
    refused), probes its health, resumes when a verifier serves the same address again, and
    deletes everything with zero dead letters."""
    port = free_port()
    verifiers = AsyncExitStack()
    await verifiers.enter_async_context(running_verifier(zk, s3, port=port))

    async def stop() -> None:
        await verifiers.aclose()

    async def start() -> None:
        await verifiers.enter_async_context(running_verifier(zk, s3, port=port))

    async with verifiers:
        await run_outage(
            cluster=cluster,
            zk=zk,
            s3=s3,
            broker=broker,
            tmp_path=tmp_path,
            dependency="verifier",
            stop=stop,
            start=start,
            verifier=f"127.0.0.1:{port}",
        )
