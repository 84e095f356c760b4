"""A stored entry: the producer's bytes plus the few metadata facts dispatch needs."""

from __future__ import annotations

from dataclasses import dataclass

from tombstone.wire import pulsar_api_pb2 as _pb

from .fastwire import message_id
from .framing import FrameError, stored_metadata

# Message ids travel as uint64; Pulsar's "-1" is their all-ones value.
MINUS_ONE = (1 << 64) - 1
NONE_KEY = b"NONE_KEY"


@dataclass(slots=True)
class Entry:
    """One SEND as stored: a single message, a batch or a chunk."""

    ledger_id: int
    entry_id: int
    stored: bytes
    num_messages: int
    batched: bool
    publish_time: int
    deliver_at: int
    key: bytes
    producer_name: str
    first_sequence_id: int
    last_sequence_id: int
    is_chunk: bool
    last_chunk: bool
    _id_bytes: bytes | None = None

    def id_bytes(self, partition: int) -> bytes:
        """The serialized MessageIdData of this entry (cached: a topic has one partition)."""
        if self._id_bytes is None:
            self._id_bytes = message_id(self.ledger_id, self.entry_id, partition)
        return self._id_bytes


def read_metadata(metadata: bytes) -> _pb.MessageMetadata:
    """Parse a MessageMetadata; FrameError if it is not one."""
    meta = _pb.MessageMetadata()
    try:
        meta.ParseFromString(metadata)
    except Exception as exc:  # DecodeError or RuntimeError, depending on the runtime
        raise FrameError(f"unparsable message metadata: {exc}") from exc
    if not meta.IsInitialized():
        raise FrameError("message metadata lacks required fields")
    return meta


def make_entry(ledger_id: int, entry_id: int, stored: bytes, meta: _pb.MessageMetadata) -> Entry:
    """Build an entry from its stored bytes and their parsed metadata."""
    batched = meta.HasField("num_messages_in_batch")
    count = meta.num_messages_in_batch if batched else 1
    if meta.HasField("ordering_key"):
        key = meta.ordering_key
    elif meta.HasField("partition_key"):
        key = meta.partition_key.encode()
    else:
        key = NONE_KEY
    is_chunk = meta.HasField("chunk_id")
    return Entry(
        ledger_id=ledger_id,
        entry_id=entry_id,
        stored=stored,
        num_messages=max(count, 1),
        batched=batched,
        publish_time=meta.publish_time,
        deliver_at=meta.deliver_at_time if meta.HasField("deliver_at_time") else 0,
        key=key,
        producer_name=meta.producer_name,
        first_sequence_id=meta.sequence_id,
        last_sequence_id=meta.sequence_id + max(count, 1) - 1,
        is_chunk=is_chunk,
        last_chunk=(not is_chunk) or meta.chunk_id == meta.num_chunks_from_msg - 1,
    )


def entry_from_stored(ledger_id: int, entry_id: int, stored: bytes) -> Entry:
    """Rebuild an entry read back from disk."""
    return make_entry(ledger_id, entry_id, stored, read_metadata(stored_metadata(stored)))
