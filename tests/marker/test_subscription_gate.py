"""A marker started before any deleter loses nothing, on the devstack broker (which keeps
nothing published while no durable subscription and no retention hold it, as Pulsar):

- topics made by hand (partitioned, no subscription, no retention): the marker starts
  NOT_SERVING, answers MarkLedgers with UNAVAILABLE naming `tombstone setup`, unlinks nothing,
  and its follower holds what an unmodified broker trimmed meanwhile;
- `tombstone setup` runs: the marker turns SERVING within its check interval, marks, and a
  deleter started afterwards on the deleters' subscription receives every intent;
- no system topic at all (or another partition count): the marker refuses to start (exit 2).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pulsar
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.systopic import decode_intent
from tests.helpers import READ_TIMEOUT, LoggedProcess
from tests.marker.builders import ML_NAME, ML_PATH, ledger, ml_bytes, ml_ledger_ids
from tests.marker.live import PARTITIONS, TOPIC, zk_store
from tests.marker.test_process import marker_env, run_cli
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _bare_topics(broker: PulsarBrokerProcess) -> None:
    """What a deployment had before `tombstone setup`: the partitioned topics and nothing
    else (compose's old shell job)."""
    for topic in (TOPIC, f"{TOPIC}-RETRY", f"{TOPIC}-DLQ"):
        broker.control.create_partitioned_topic(topic, PARTITIONS)


def _env(zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path) -> dict[str, str]:
    return {
        **marker_env(zk, broker, tmp_path),
        "TOMBSTONE_MARKER_SUBSCRIPTION_CHECK_INTERVAL": "300ms",
    }


async def _health(channel: aio.Channel) -> int:
    response = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="tombstone.v1.Marker")
    )
    return int(response.status)


async def _until_health(channel: aio.Channel, status: int) -> None:
    deadline = time.monotonic() + READ_TIMEOUT
    while await _health(channel) != status:
        assert time.monotonic() < deadline, f"health never became {status}"
        await asyncio.sleep(0.1)


def _deleter_receives(
    broker: PulsarBrokerProcess, expected: int
) -> list[_pd.PendingDeleteLedgerInfo]:
    """A deleter started now: a Shared consumer of the deleters' subscription."""
    client = pulsar.Client(
        broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        consumer = client.subscribe(
            TOPIC, "tombstone-deleter", consumer_type=pulsar.ConsumerType.Shared
        )
        got: list[_pd.PendingDeleteLedgerInfo] = []
        while True:
            try:
                message = consumer.receive(timeout_millis=10_000 if len(got) < expected else 500)
            except pulsar.Timeout:
                return got
            consumer.acknowledge(message)
            got.append(decode_intent(message.data(), message.properties()))
    finally:
        client.close()


async def test_a_marker_started_before_setup_loses_nothing(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    _bare_topics(broker)
    async with zk_store(zk) as store:
        await store.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 7))), make_parents=True)
    env = _env(zk, broker, tmp_path)
    marker = await LoggedProcess.start(
        "services.marker", {**env, "TOMBSTONE_MARKER_FOLLOW": "true"}
    )
    held = await marker.wait_for("publishing_held")
    assert "tombstone setup" in held["reason"]
    ready = await marker.wait_for("service_ready")
    await marker.wait_for("follower_indexed")
    request = _mk.MarkLedgersRequest(
        component=_pd.MANAGED_LEDGER, managed_ledger_name=ML_NAME, ledger_ids=[1, 2, 3]
    )
    async with aio.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
        assert await _health(channel) == NOT_SERVING
        with pytest.raises(aio.AioRpcError) as refused:
            await _mk_grpc.MarkerStub(channel).MarkLedgers(request)
        assert refused.value.code().name == "UNAVAILABLE"
        assert "run `tombstone setup`" in (refused.value.details() or "")
        async with zk_store(zk) as store:
            node = await store.get(ML_PATH)
            assert ml_ledger_ids(node.data) == [1, 2, 3, 4, 5, 6]
            # An unmodified broker trims ledger 6 meanwhile: the follower must hold its intent.
            await store.set(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 6))), version=0)
        await asyncio.sleep(1)

        code, out = await run_cli("setup", env=env)
        assert code == 0, out
        await marker.wait_for("deleter_subscription_present")
        await _until_health(channel, SERVING)
        response = await _mk_grpc.MarkerStub(channel).MarkLedgers(request)
        assert sorted(m.ledger_id for m in response.marked) == [1, 2, 3]

    intents = await asyncio.to_thread(_deleter_receives, broker, 4)
    marker.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(marker.process.wait(), READ_TIMEOUT) == 0
    assert sorted(i.ledger_id for i in intents) == [1, 2, 3, 6]
    observed = [i for i in intents if i.source == _pd.OBSERVED]
    assert [i.ledger_id for i in observed] == [6]


async def test_a_dropped_subscription_stops_publishing_again(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """An operator drops the subscription on one partition: within the check interval the
    marker is NOT_SERVING (readiness; liveness stays SERVING) and refuses to mark; setup
    brings it back."""
    env = _env(zk, broker, tmp_path)
    code, out = await run_cli("setup", env=env)
    assert code == 0, out
    marker = await LoggedProcess.start("services.marker", env)
    ready = await marker.wait_for("service_ready")
    async with aio.insecure_channel(f"127.0.0.1:{ready['port']}") as channel:
        await _until_health(channel, SERVING)
        broker.control.delete_subscription(f"{TOPIC}-partition-1", "tombstone-deleter")
        held = await marker.wait_for("publishing_held")
        assert f"{TOPIC}-partition-1" in held["reason"]
        await _until_health(channel, NOT_SERVING)
        # Held, not broken: readiness fails, liveness passes (a restart would not help).
        address = f"127.0.0.1:{ready['port']}"
        probes = [
            (await run_cli("health", "--address", address, flag, env=env))[0]
            for flag in ("--readiness", "--liveness")
        ]
        assert probes == [1, 0]
        code, out = await run_cli("setup", "--check", env=env)
        assert code == 1
        assert f"missing: subscription tombstone-deleter on {TOPIC} (partitions 1 of 4)" in out
        assert (await run_cli("setup", env=env))[0] == 0
        await _until_health(channel, SERVING)
    marker.process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(marker.process.wait(), READ_TIMEOUT) == 0


@pytest.mark.parametrize("partitions", [0, 2])
async def test_the_marker_refuses_another_partition_count(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path, partitions: int
) -> None:
    """No system topic (it reads as 0 partitions) or 2 partitions where 4 are configured:
    one line on stderr, exit 2."""
    if partitions:
        broker.control.create_partitioned_topic(TOPIC, partitions)
    env = _env(zk, broker, tmp_path)
    code, out = await run_cli("marker", "serve", env=env)
    assert code == 2, out
    refusal = [line for line in out.splitlines() if line.startswith("marker: ")]
    assert refusal == [
        f"marker: refusing to start: {TOPIC} has {partitions} partitions but "
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS is 4 (run `tombstone setup`, or fix the setting)"
    ]
