"""`python -m services.marker` as a real process: killed between send and write, restarted,
driven by `tombstone mark`, stopped with SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
from grpc import aio

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from tests.helpers import READ_TIMEOUT, ROOT, LoggedProcess
from tests.marker.builders import ML_NAME, ML_PATH, ledger, ml_bytes, ml_ledger_ids
from tests.marker.live import PARTITIONS, create_system_topic, read_topic, zk_store
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd


async def launch(env: dict[str, str]) -> tuple[LoggedProcess, int]:
    marker = await LoggedProcess.start("services.marker", env)
    ready = await marker.wait_for("service_ready")
    return marker, int(ready["port"])


def marker_env(
    zookeeper: ZooKeeperServer, broker: PulsarBrokerProcess, journal: Path
) -> dict[str, str]:
    return {
        "TOMBSTONE_GRPC_PORT": "0",
        "TOMBSTONE_METRICS_PORT": "0",  # off: its default port is fixed
        "TOMBSTONE_LOG_FORMAT": "json",
        "TOMBSTONE_ZOOKEEPER_SERVERS": zookeeper.address,
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_MARKER_ID": "marker-crash",
        "TOMBSTONE_MARKER_JOURNAL_DIR": str(journal),
        "TOMBSTONE_MARKER_BELIEVE_ENABLED": "false",
    }


async def run_cli(*args: str, env: dict[str, str]) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.cli",
        *args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), READ_TIMEOUT)
    return process.returncode or 0, out.decode()


@pytest.mark.slow
async def test_killed_between_send_and_write_then_retried(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """Killed after every receipt but before the write: the ledgers stay listed and the PDLIs
    are on the topic. Restarted with the same marker id, the retried Mark (via `tombstone
    mark`) unlinks them and the topic still holds each PDLI exactly once."""
    create_system_topic(broker)
    ids = [str(i) for i in range(1, 51)]
    async with zk_store(zk) as store:
        await store.create(ML_PATH, ml_bytes(*(ledger(int(i)) for i in ids)), make_parents=True)
    env = marker_env(zk, broker, tmp_path)
    first, port = await launch({**env, "TOMBSTONE_MARKER_TEST_PAUSE_AFTER_SEND": "60s"})
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = _mk.MarkLedgersRequest(
            component=_pd.MANAGED_LEDGER, managed_ledger_name=ML_NAME, ledger_ids=map(int, ids)
        )
        call = asyncio.ensure_future(_mk_grpc.MarkerStub(channel).MarkLedgers(request))
        await first.wait_for("test_pause_after_send")
        first.process.kill()
        await first.process.wait()
        with pytest.raises(aio.AioRpcError):
            await call
    async with zk_store(zk) as store:
        assert [int(i) for i in ids] == ml_ledger_ids((await store.get(ML_PATH)).data)

    second, port = await launch(env)
    code, out = await run_cli(
        "mark",
        "--ml",
        ML_NAME,
        "--source",
        "broker",
        "--json",
        *ids,
        env={"TOMBSTONE_MARKER_ADDRESS": f"127.0.0.1:{port}"},
    )
    second.process.send_signal(signal.SIGTERM)
    response = json.loads(out)
    received = await read_topic(broker, len(ids))
    async with zk_store(zk) as store:
        node = await store.get(ML_PATH)
    assert (0, len(ids), [], 1) == (
        code,
        len(response["marked"]),
        ml_ledger_ids(node.data),
        node.version,
    )
    assert sorted(int(i) for i in ids) == sorted(r.pdli.ledger_id for r in received)
    assert await asyncio.wait_for(second.process.wait(), READ_TIMEOUT) == 0


async def test_cli_reports_errors_with_the_status(tmp_path: Path) -> None:
    """`tombstone mark` against no marker prints the error and exits non-zero."""
    code, out = await run_cli(
        "mark",
        "--ml",
        ML_NAME,
        "1",
        env={"TOMBSTONE_MARKER_ADDRESS": "127.0.0.1:1", "TOMBSTONE_MARKER_TIMEOUT": "2s"},
    )
    assert (code, "error (UNAVAILABLE)" in out) == (1, True)


async def test_cli_refuses_an_alias_before_sending(tmp_path: Path) -> None:
    """`tombstone mark` with a dot-segment ML name fails with INVALID_ARGUMENT naming the
    field, without contacting any marker (the address below has none)."""
    code, out = await run_cli(
        "mark",
        "--ml",
        "public/default/./persistent/orders",
        "1",
        env={"TOMBSTONE_MARKER_ADDRESS": "127.0.0.1:1", "TOMBSTONE_MARKER_TIMEOUT": "2s"},
    )
    assert (code, "error (INVALID_ARGUMENT): managed_ledger_name" in out) == (1, True)


async def test_sigterm_lets_an_in_flight_mark_finish(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """SIGTERM while a Mark sits between its sends and its write: the call still completes
    (the write lands) and the process exits 0."""
    create_system_topic(broker)
    async with zk_store(zk) as store:
        await store.create(ML_PATH, ml_bytes(ledger(1), ledger(2)), make_parents=True)
    env = {**marker_env(zk, broker, tmp_path), "TOMBSTONE_MARKER_TEST_PAUSE_AFTER_SEND": "1s"}
    marker, port = await launch(env)
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = _mk.MarkLedgersRequest(
            component=_pd.MANAGED_LEDGER, managed_ledger_name=ML_NAME, ledger_ids=[1]
        )
        call = asyncio.ensure_future(_mk_grpc.MarkerStub(channel).MarkLedgers(request))
        await marker.wait_for("test_pause_after_send")
        marker.process.send_signal(signal.SIGTERM)
        response = await call
    async with zk_store(zk) as store:
        remaining = ml_ledger_ids((await store.get(ML_PATH)).data)
    assert ([m.ledger_id for m in response.marked], response.written, remaining) == ([1], True, [2])
    assert await asyncio.wait_for(marker.process.wait(), READ_TIMEOUT) == 0
