"""Unit tests of the broker's pure parts: framing, topic names, cursors."""

from __future__ import annotations

import pytest

from devstack.pulsar.cursor import Cursor
from devstack.pulsar.framing import (
    ChecksumMismatch,
    FrameError,
    FrameReader,
    crc32c,
    encode_command,
    split_payload,
)
from devstack.pulsar.names import InvalidTopicName, TopicName
from tombstone.wire import pulsar_api_pb2 as _pb

PING = encode_command(_pb.BaseCommand(type=_pb.BaseCommand.PING, ping=_pb.CommandPing()))


def test_crc32c_check_value() -> None:
    """The checksum is CRC-32C: its check value for "123456789" is 0xE3069283."""
    assert crc32c(b"123456789") == 0xE3069283


def test_reader_splits_coalesced_and_partial_frames() -> None:
    """Frames arriving together are split; a partial frame waits for its remainder."""
    reader = FrameReader()
    data = PING * 2 + PING[:3]
    assert len(reader.feed(data)) == 2
    assert len(reader.feed(PING[3:])) == 1
    assert reader.pending == 0


def test_reader_refuses_oversize_frames() -> None:
    """A frame larger than the limit is an error, not a reason to buffer forever."""
    with pytest.raises(FrameError):
        FrameReader(max_frame_size=100).feed(b"\x00\x00\x10\x00")


def test_payload_with_wrong_checksum_is_refused() -> None:
    """A SEND payload whose checksum does not match raises ChecksumMismatch."""
    body = b"\x00\x00\x00\x01" + b"m" + b"payload"
    good = b"\x0e\x01" + crc32c(body).to_bytes(4, "big") + body
    assert good == split_payload(good).stored
    bad = good[:2] + b"\x00\x00\x00\x00" + body
    with pytest.raises(ChecksumMismatch):
        split_payload(bad)


def test_topic_names_expand_and_know_partitions() -> None:
    """Short names expand to public/default; partition names know their index and base."""
    name = TopicName.parse("t-partition-3")
    assert (
        name.full,
        name.partition_index,
        name.base.full,
    ) == ("persistent://public/default/t-partition-3", 3, "persistent://public/default/t")
    with pytest.raises(InvalidTopicName):
        TopicName.parse("kafka://a/b/c")


def test_cursor_individual_acks_advance_the_mark_delete_position() -> None:
    """Acking 1 then 0 moves the mark-delete position past both."""
    cursor = Cursor()
    cursor.ack(1)
    assert (cursor.mark_delete, cursor.backlog(3)) == (0, 2)
    cursor.ack(0)
    assert (cursor.mark_delete, cursor.backlog(3)) == (2, 1)


def test_cursor_batch_acks_intersect_until_empty() -> None:
    """Partial batch acks intersect; the entry is acked once no index remains."""
    cursor = Cursor()
    assert not cursor.ack_batch_indexes(0, [0b11110])
    assert (cursor.ack_batch_indexes(0, [0b11101]) or cursor.batch_acks[0]) == [0b11100]
    assert cursor.ack_batch_indexes(0, [0])
    assert cursor.is_acked(0)


def test_cursor_snapshot_round_trips() -> None:
    """A restored snapshot has the same acks and counts."""
    cursor = Cursor()
    cursor.ack(2)
    cursor.increment_redelivery(1)
    restored = Cursor.restore(cursor.snapshot())
    assert (cursor.mark_delete, cursor.acked, cursor.redelivery_counts) == (
        restored.mark_delete,
        restored.acked,
        restored.redelivery_counts,
    )
