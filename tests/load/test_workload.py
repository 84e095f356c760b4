"""The simulated broker's bookkeeping when a call fails: nothing unlinked goes untracked, and
nothing unwritten stays in its list."""

from __future__ import annotations

import pytest

from benchmarks.load.workload import TopicState
from services.core.errors import TombstoneError
from tests.load.conftest import Prepared
from tombstone.v1 import pending_delete_pb2 as _pd


async def test_ledgers_unlinked_while_the_answer_was_lost_are_tracked(prepared: Prepared) -> None:
    """If the list lost ledgers while the broker did not see the marker's answer, re-reading
    the znode tracks each of them until deleted."""
    topic: TopicState = prepared.workload.topics[0]
    await prepared.workload._roll_over(topic)
    first = topic.info.ledgerInfo[0].ledgerId
    unlinked = type(topic.info)()
    unlinked.CopyFrom(topic.info)
    del unlinked.ledgerInfo[0]
    await prepared.workload.mls.write(topic.ml_name, unlinked, version=topic.version)
    await prepared.workload._reload(topic)
    assert set(prepared.tracker.pending) == {(first, _pd.LEDGER)}
    assert [e.ledgerId for e in topic.info.ledgerInfo] == [e.ledgerId for e in unlinked.ledgerInfo]


async def test_failed_roll_over_leaves_the_list_as_written(prepared: Prepared) -> None:
    """A list write that fails (a stale version) removes the new ledgers from the broker's
    list again, so a later re-read does not take them for unlinked ones."""
    topic: TopicState = prepared.workload.topics[0]
    before = [e.ledgerId for e in topic.info.ledgerInfo]
    topic.version += 5
    with pytest.raises(TombstoneError):
        await prepared.workload._roll_over(topic)
    await prepared.workload._reload(topic)
    assert ([e.ledgerId for e in topic.info.ledgerInfo], prepared.tracker.pending) == (before, {})
