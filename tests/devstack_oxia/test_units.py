"""The devstack Oxia server's small parts: key encoding, sequential keys, hash ranges, the
notification log's retention and a shard's first version id."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from devstack.oxia import keys, sequences
from devstack.oxia.notifications import Batch, NotificationLog
from devstack.oxia.service import hash_ranges
from devstack.oxia.shard import Put, Shard
from devstack.oxia.storage import Record, SortedRecords


def test_keys_sort_by_depth_then_bytes_with_the_separator_highest():
    ordered = ["a", "b", "/", "/a", "/a-b", "/a0", "/a/", "/a/b", "/b/a", "/a/b/c"]
    shuffled = ordered[5:] + ordered[:5]
    assert sorted(shuffled, key=keys.encode) == ordered


def test_a_doubled_trailing_separator_opens_no_level_and_internal_keys_sort_last():
    assert keys.encode("a//")[:2] == (1).to_bytes(2, "big")
    assert keys.encode("__oxia/x")[0] & 0x80
    assert keys.encode("/z/z/z/z/z") < keys.encode("__oxia/a")


def test_sequential_keys_continue_the_last_one_part_by_part():
    records = SortedRecords()
    assert sequences.last_parts(records, "p") == []
    key, parts = sequences.next_key([], "p", [5, 6])
    assert key == "p-00000000000000000005-00000000000000000006"
    records.put(key, Record(b"", 0, 0, 0, 0))
    records.put("q-00000000000000000009", Record(b"", 1, 0, 0, 0))
    assert sequences.last_parts(records, "p") == parts
    assert sequences.next_key(parts, "p", [1, 1, 1])[0] == keys.sequence_key("p", [6, 7, 1])
    assert sequences.last_key(records, "p") == key
    with pytest.raises(sequences.SequenceError):
        sequences.next_key(parts, "p", [1])  # fewer deltas than the sequence has parts
    with pytest.raises(sequences.SequenceError):
        sequences.next_key([], "p", [0])


def test_a_shard_started_high_gives_version_ids_from_there():
    """`first_version_id` (`--first-version-id`): the first put takes it, the next one more."""
    shard = Shard(0, first_version_id=2**33)
    (first,), _, _ = shard.write([Put("/a", b"1")], [], [])
    (second,), _, _ = shard.write([Put("/a", b"2")], [], [])
    assert first.record is not None
    assert second.record is not None
    assert (first.record.version_id, second.record.version_id) == (2**33, 2**33 + 1)


def test_hash_ranges_cover_the_32_bit_space_without_gaps():
    for count in (1, 3, 10):
        ranges = hash_ranges(count)
        assert ranges[0][0] == 0
        assert ranges[-1][1] == 2**32 - 1
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))


def test_the_notification_log_keeps_at_least_the_last_batches_in_order():
    async def run() -> list[int]:
        log = NotificationLog(retention=3)
        for offset in range(0, 20, 2):
            log.append(Batch(offset, 0, {}))
        return [b.offset for b in log.after(9)]

    offsets = asyncio.run(run())
    assert offsets[-3:] == [14, 16, 18]
    assert offsets == sorted(offsets)
    assert min(offsets) > 9
