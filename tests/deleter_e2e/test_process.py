"""The deleter as a real process: the CLI status reaches zero, SIGTERM exits 0, SIGKILL in the
middle of a batch leaves nothing orphaned once another deleter takes over."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from tests.deleter.stack import deleter_config, drained, running_deleter
from tests.deleter_e2e.checks import assert_all_gone, assert_safe, ledgers_in_zookeeper
from tests.deleter_e2e.conftest import Trimmed
from tests.deleter_e2e.process import DeleterProcess, cli, deleter_env
from tests.helpers import assert_eventually
from tombstone.v1 import pending_delete_pb2 as _pd


async def test_cli_status_reaches_zero_and_sigterm_exits_zero(
    trimmed: Trimmed,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """`tombstone deleter status` reports zero in flight once drained; SIGTERM then stops the
    process with exit code 0; everything unlinked is gone, everything listed kept."""
    env = deleter_env(zk, s3, broker, trimmed.verifier)
    deleter = await DeleterProcess.start(env, tmp_path / "deleter.log")
    try:
        ready = await deleter.wait_for("service_ready")
        address = f"127.0.0.1:{ready['port']}"

        async def zero_in_flight() -> dict[str, object]:
            code, out = await cli("deleter", "status", "--json", "--address", address)
            assert code == 0, out
            status: dict[str, object] = json.loads(out)
            assert (status["estimated_in_flight"], status["in_process"]) == (0, 0)
            return status

        await assert_eventually(zero_in_flight, timeout=60, interval=0.5)
        code, text = await cli("deleter", "status", "--address", address)
        deleter.process.send_signal(signal.SIGTERM)
        exit_code = await asyncio.wait_for(deleter.process.wait(), 30)
    finally:
        await deleter.stop()
    assert (code, exit_code) == (0, 0)
    assert "estimated in-flight deletions: 0" in text
    listed, _ = await assert_safe(zk, s3, trimmed.model, trimmed.objects_before)
    await assert_all_gone(zk, s3, trimmed.model, trimmed.marked, listed)


async def test_killed_mid_batch_leaves_nothing_orphaned(
    trimmed: Trimmed,
    zk: ZooKeeperServer,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    tmp_path: Path,
) -> None:
    """SIGKILL while deletes are under way (slowed by the ZooKeeper rate limit): a second
    deleter settles the rest; nothing referenced is deleted, nothing unlinked remains."""
    unlinked = trimmed.marked[_pd.LEDGER]
    present = await ledgers_in_zookeeper(zk, unlinked)
    env = deleter_env(
        zk, s3, broker, trimmed.verifier, TOMBSTONE_DELETER_ZOOKEEPER_OPS_PER_SECOND="1"
    )
    deleter = await DeleterProcess.start(env, tmp_path / "deleter.log")
    try:
        await deleter.wait_for("service_ready")

        async def some_deleted() -> None:
            assert len(await ledgers_in_zookeeper(zk, unlinked)) < len(present)

        await assert_eventually(some_deleted, timeout=30, interval=0.1)
        deleter.process.kill()
        await deleter.process.wait()
    finally:
        await deleter.stop()
    assert await ledgers_in_zookeeper(zk, unlinked)  # work was left mid-batch
    async with running_deleter(deleter_config(zk, s3, broker, trimmed.verifier)) as running:
        status = await drained(running.deleter)
    listed, _ = await assert_safe(zk, s3, trimmed.model, trimmed.objects_before)
    await assert_all_gone(zk, s3, trimmed.model, trimmed.marked, listed)
    assert status.dead_letter_backlog == 0
