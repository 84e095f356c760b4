"""`python -m services.marker` with `TOMBSTONE_MARKER_FOLLOW=true`: the follower runs in the
marker's lifecycle, and a clean stop leaves a checkpoint and gives the leadership up."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.marker.config import MarkerConfig
from services.marker.follower.checkpoint import CheckpointStore
from services.marker.follower.leadership import LEADER_PATH
from tests.helpers import READ_TIMEOUT, LoggedProcess
from tests.marker.builders import ML_NAME, ML_PATH, ledger, ml_bytes
from tests.marker.live import create_system_topic, read_topic, zk_store
from tests.marker.test_process import marker_env
from tombstone.v1 import pending_delete_pb2 as _pd


def test_follow_settings() -> None:
    config = MarkerConfig.from_env(
        {
            "TOMBSTONE_MARKER_FOLLOW": "true",
            "TOMBSTONE_MARKER_FOLLOW_CHECKPOINT_INTERVAL": "5m",
        }
    )
    assert (config.follow, config.follow_checkpoint_interval.total_seconds()) == (True, 300)
    assert MarkerConfig.from_env({}).follow is False


async def test_the_marker_process_follows(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """A broker-style trim becomes an OBSERVED PDLI from the marker process (its marker id);
    SIGTERM ends it cleanly after a last checkpoint, with the leader znode released."""
    create_system_topic(broker)
    async with zk_store(zk) as store:
        await store.create(ML_PATH, ml_bytes(*(ledger(i) for i in range(1, 5))), make_parents=True)
        env = {**marker_env(zk, broker, tmp_path), "TOMBSTONE_MARKER_FOLLOW": "true"}
        marker = await LoggedProcess.start("services.marker", env)
        await marker.wait_for("follower_indexed")
        await store.set(ML_PATH, ml_bytes(ledger(3), ledger(4)), version=0)
        received = await read_topic(broker, 2)
        marker.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(marker.process.wait(), READ_TIMEOUT) == 0
        index = await CheckpointStore(store).load()
        leader = await store.exists(LEADER_PATH)
    assert {(1, 1), (2, 1)} == {(r.pdli.ledger_id, r.pdli.fence_token) for r in received}
    assert {(_pd.OBSERVED, "marker-crash", ML_NAME)} == {
        (r.pdli.source, r.pdli.marker_id, r.pdli.managed_ledger_name) for r in received
    }
    assert index is not None
    entry = index.get(ML_PATH)
    assert entry is not None
    assert entry[1] == 1
    assert leader is None
