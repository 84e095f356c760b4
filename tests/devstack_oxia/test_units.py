"""The devstack Oxia server's small parts: key encoding, sequential keys, hash ranges and the
notification log's retention."""

from __future__ import annotations

import asyncio
import itertools

from devstack.oxia import keys
from devstack.oxia.notifications import Batch, NotificationLog
from devstack.oxia.service import hash_ranges


def test_keys_sort_by_depth_then_bytes_with_the_separator_highest():
    ordered = ["a", "b", "/", "/a", "/a-b", "/a0", "/a/", "/a/b", "/b/a", "/a/b/c"]
    shuffled = ordered[5:] + ordered[:5]
    assert sorted(shuffled, key=keys.encode) == ordered


def test_a_doubled_trailing_separator_opens_no_level_and_internal_keys_sort_last():
    assert keys.encode("a//")[:2] == (1).to_bytes(2, "big")
    assert keys.encode("__oxia/x")[0] & 0x80
    assert keys.encode("/z/z/z/z/z") < keys.encode("__oxia/a")


def test_sequential_keys_round_trip():
    key = keys.sequence_key("p", [5, 6])
    assert key == "p-00000000000000000005-00000000000000000006"
    assert keys.sequence_components("p", key) == [5, 6]
    assert keys.sequence_components("p", "p-12") is None
    assert keys.sequence_components("q", key) is None


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
