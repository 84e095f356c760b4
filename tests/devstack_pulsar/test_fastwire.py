"""The hand-encoded hot-path frames equal what protobuf would produce."""

from __future__ import annotations

import pytest

from devstack.pulsar.fastwire import message_frame, message_id, send_receipt_frame
from devstack.pulsar.framing import FrameReader, encode_command, encode_payload_command
from tombstone.wire import pulsar_api_pb2 as _pb

T = _pb.BaseCommand.Type
U64_MAX = (1 << 64) - 1


@pytest.mark.parametrize(("ledger", "entry"), [(1, 0), (300, 70000), (U64_MAX, U64_MAX)])
def test_send_receipt_matches_protobuf(ledger: int, entry: int) -> None:
    """SEND_RECEIPT bytes equal protobuf's for small, large and all-ones ids."""
    receipt = _pb.CommandSendReceipt(
        producer_id=5,
        sequence_id=1 << 40,
        message_id=_pb.MessageIdData(ledgerId=ledger, entryId=entry),
    )
    expected = encode_command(_pb.BaseCommand(type=T.SEND_RECEIPT, send_receipt=receipt))
    assert expected == send_receipt_frame(5, 1 << 40, ledger, entry)


@pytest.mark.parametrize(
    ("partition", "count", "ack_set"), [(-1, 0, None), (3, 2, [28, -1]), (0, 0, [1 << 62])]
)
def test_message_matches_protobuf(partition: int, count: int, ack_set: list[int] | None) -> None:
    """MESSAGE bytes (with partition, redelivery count, ack set) equal protobuf's."""
    message = _pb.CommandMessage(
        consumer_id=7, message_id=_pb.MessageIdData(ledgerId=9, entryId=1234)
    )
    if partition >= 0:
        message.message_id.partition = partition
    if count:
        message.redelivery_count = count
    if ack_set:
        message.ack_set.extend(ack_set)
    stored = b"\x0e\x01stored-bytes"
    expected = encode_payload_command(_pb.BaseCommand(type=T.MESSAGE, message=message), stored)
    actual = message_frame(7, message_id(9, 1234, partition), count, ack_set, stored)
    assert expected == actual
    assert len(FrameReader().feed(actual)) == 1
