"""The load test's final check reads the real ZooKeeper and S3 and reports what is wrong: a
listed ledger that is missing (S1) and an unlinked ledger or object that remains (L1)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from grpc import aio

from benchmarks.load.checks import final_check
from benchmarks.load.tracker import Tracker
from benchmarks.load.workload import Marked, Workload, WorkloadOptions, _object_keys
from devstack.s3 import S3Server
from devstack.simulator.s3 import S3ObjectStore, open_object_store
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ANY_VERSION
from services.metadata.zk_store import ZkMetadataStore
from tombstone.v1 import pending_delete_pb2 as _pd

BUCKET = "pulsar-offload"


@dataclass
class Prepared:
    workload: Workload
    tracker: Tracker
    store: ZkMetadataStore
    objects: S3ObjectStore


@pytest.fixture
async def prepared(zk: ZooKeeperServer, s3: S3Server) -> AsyncIterator[Prepared]:
    """Two topics written by the workload (one listed ledger each), nothing marked yet."""
    options = WorkloadOptions(brokers=1, topics=2, rate=1.0, duration=0.0)
    async with (
        ZkMetadataStore.connect(zk.address) as store,
        open_object_store(s3.client_config()) as objects,
    ):
        # The checks never call the marker: a channel to nowhere stands in.
        channel = aio.insecure_channel("127.0.0.1:9")
        tracker = Tracker(store, objects, BUCKET, min_age=0.0)
        workload = Workload(
            options, store=store, objects=objects, marker=channel,
            bucket=BUCKET, cluster="standalone", on_marked=tracker.add,
        )  # fmt: skip
        await workload.prepare()
        yield Prepared(workload, tracker, store, objects)
        await channel.close()


def _first_ledger(prepared: Prepared) -> int:
    ledger_id: int = prepared.workload.topics[0].info.ledgerInfo[0].ledgerId
    return ledger_id


async def test_untouched_cluster_passes(prepared: Prepared) -> None:
    """Every listed ledger exists and nothing was unlinked: the check passes."""
    result = await final_check(prepared.workload, prepared.tracker)
    assert (result.passed, result.listed_checked) == (True, 2)


async def test_missing_listed_ledger_is_an_s1_violation(prepared: Prepared) -> None:
    """A ledger still listed whose znode is gone is reported under S1."""
    ledger_id = _first_ledger(prepared)
    await prepared.store.delete(prepared.tracker.paths.ledger_path(ledger_id), version=ANY_VERSION)
    result = await final_check(prepared.workload, prepared.tracker)
    assert (result.passed, len(result.s1_violations)) == (False, 1)
    assert str(ledger_id) in result.s1_violations[0]


async def test_remaining_unlinked_ledger_is_an_l1_failure(prepared: Prepared) -> None:
    """A marked ledger whose znode is still there is reported under L1, and is gone from
    the report once the znode is deleted."""
    ledger_id = _first_ledger(prepared)
    prepared.tracker.add(Marked(ledger_id, _pd.LEDGER, time.monotonic()))
    before = await final_check(prepared.workload, prepared.tracker)
    await prepared.store.delete(prepared.tracker.paths.ledger_path(ledger_id), version=ANY_VERSION)
    await prepared.tracker.poll_once()
    after = await final_check(prepared.workload, prepared.tracker)
    assert (len(before.l1_remaining), len(after.l1_remaining)) == (1, 0)
    assert (prepared.tracker.pending, prepared.tracker.deleted["bookkeeper"]) == ({}, 1)


async def test_offloaded_ledger_needs_both_objects(prepared: Prepared) -> None:
    """An offloaded listed ledger is checked in S3: an object missing is an S1 violation."""
    topic = prepared.workload.topics[0]
    await prepared.workload._add_ledger(topic.ml_name, topic.info, offloaded=True)
    entry = topic.info.ledgerInfo[-1]
    topic.version = await prepared.workload.mls.write(topic.ml_name, topic.info, version=0)
    data_key, _ = _object_keys(entry.ledgerId, entry.offloadContext)
    intact = await final_check(prepared.workload, prepared.tracker)
    client = prepared.objects._client
    await client.delete_object(Bucket=BUCKET, Key=data_key)
    broken = await final_check(prepared.workload, prepared.tracker)
    assert (intact.passed, broken.s1_violations) == (
        True,
        [f"listed ledger {entry.ledgerId} missing: {data_key}"],
    )
