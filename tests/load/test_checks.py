"""The load test's final check reads the real ZooKeeper and S3 and reports what is wrong: a
listed ledger that is missing (S1) and an unlinked ledger or object that remains (L1)."""

from __future__ import annotations

import time

from benchmarks.load.checks import final_check
from benchmarks.load.workload import Marked, object_keys
from services.metadata import ANY_VERSION
from tests.load.conftest import BUCKET, Prepared
from tombstone.v1 import pending_delete_pb2 as _pd


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
    data_key, _ = object_keys(entry.ledgerId, entry.offloadContext)
    intact = await final_check(prepared.workload, prepared.tracker)
    client = prepared.objects._client
    await client.delete_object(Bucket=BUCKET, Key=data_key)
    broken = await final_check(prepared.workload, prepared.tracker)
    assert (intact.passed, broken.s1_violations) == (
        True,
        [f"listed ledger {entry.ledgerId} missing: {data_key}"],
    )
