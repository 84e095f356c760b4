"""A topic: its log of entries, producers, subscriptions and deduplication state."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tombstone.wire import pulsar_api_pb2 as _pb

from .cursor import Cursor
from .entries import Entry, make_entry
from .names import TopicName
from .peer import Peer
from .storage import TopicStore
from .subscription import Subscription

if TYPE_CHECKING:
    from .faults import Faults

DUPLICATE = (-1, -1)


class TopicHost(Protocol):
    """What a topic asks of its broker (`broker.Broker`)."""

    faults: Faults
    trim_floors: dict[str, int]
    """Each topic's trim floor, kept across restarts."""

    def deduplication_enabled(self, ns: str) -> bool: ...

    def retains(self, name: TopicName) -> bool: ...

    def record_trim(self, topic: Topic) -> None: ...

    def schedule_dispatch(self, sub: Subscription) -> None: ...

    def schedule_cursor_save(self, topic: Topic, sub: Subscription) -> None: ...


@dataclass(eq=False)
class Producer:
    peer: Peer
    producer_id: int
    name: str
    topic: Topic
    access_mode: int
    """ProducerAccessMode: Shared, Exclusive, WaitForExclusive or ExclusiveWithFencing."""
    delayed: deque[object] | None = field(default=None)
    """SENDs held back by a delay fault, processed in order (receipts stay ordered)."""

    @property
    def shared(self) -> bool:
        return self.access_mode == 0


class ProducerRefused(Exception):
    """A producer the topic will not accept; carries the ServerError to answer with."""

    def __init__(self, error: int, message: str) -> None:
        super().__init__(message)
        self.error = error


class Topic:
    def __init__(
        self, broker: TopicHost, name: TopicName, store: TopicStore, ledger_id: int
    ) -> None:
        self.broker = broker
        self.name = name
        self.partition_index = name.partition_index
        self.store = store
        self.ledger_id = ledger_id
        self.next_entry_id = 0
        self.entries: list[Entry] = store.load_entries()
        self.index_of = {(e.ledger_id, e.entry_id): i for i, e in enumerate(self.entries)}
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.highest_sequence: dict[str, int] = {}
        self.schema: _pb.Schema | None = None
        self.topic_epoch = 0
        self.msg_in = 0
        self.trimmed = min(broker.trim_floors.get(name.full, 0), len(self.entries))
        """Entries below this index are gone: no new subscription, reader or seek reaches
        them (see `keeps_entries`)."""
        for entry in self.entries:
            self._record_sequence(entry)
        for sub_name, snap in store.load_cursors().items():
            cursor = Cursor.restore(snap["cursor"])
            self.subscriptions[sub_name] = Subscription(
                self, sub_name, int(snap["type"]), durable=True, cursor=cursor
            )

    # producers --------------------------------------------------------------------------

    def add_producer(self, producer: Producer, topic_epoch: int | None = None) -> None:
        """Admit a producer by its access mode; ProducerRefused says why not.

        ExclusiveWithFencing closes every other producer and raises the topic epoch, so a
        fenced producer that reconnects with its old epoch is refused with ProducerFenced.
        WaitForExclusive is admitted like Exclusive (no queueing).
        """
        current = self.producers.get(producer.name)
        if current is not None and current is not producer:
            reason = f"producer {producer.name} is already connected to {self.name.full}"
            raise ProducerRefused(_pb.ProducerBusy, reason)
        if topic_epoch is not None and topic_epoch < self.topic_epoch:
            raise ProducerRefused(_pb.ProducerFenced, f"producer {producer.name} was fenced")
        others = [p for p in self.producers.values() if p is not producer]
        if producer.access_mode == _pb.ExclusiveWithFencing:
            self.topic_epoch += 1
            for other in others:
                other.peer.close_producer(other.producer_id)
        elif others and (not producer.shared or any(not p.shared for p in others)):
            reason = f"topic {self.name.full} has an exclusive producer conflict"
            raise ProducerRefused(_pb.ProducerFenced, reason)
        self.producers[producer.name] = producer

    def remove_producer(self, producer: Producer) -> None:
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]

    def deduplication(self) -> bool:
        return self.broker.deduplication_enabled(self.name.ns)

    def last_sequence_id(self, producer_name: str) -> int:
        """What PRODUCER_SUCCESS reports: -1 unless deduplication tracks this name."""
        if not self.deduplication():
            return -1
        return self.highest_sequence.get(producer_name, -1)

    def publish(
        self, sequence_id: int, stored: bytes, meta: _pb.MessageMetadata
    ) -> tuple[int, int]:
        """Store one SEND; returns its (ledger, entry), or DUPLICATE if dedup dropped it."""
        entry = make_entry(self.ledger_id, self.next_entry_id, stored, meta)
        # Chunks of one message share its sequence id: only the last one is checked.
        check = self.deduplication() and entry.last_chunk
        if check and sequence_id <= self.highest_sequence.get(entry.producer_name, -1):
            return DUPLICATE
        self.store.append(entry)
        self.next_entry_id += 1
        self.index_of[(entry.ledger_id, entry.entry_id)] = len(self.entries)
        self.entries.append(entry)
        self.msg_in += entry.num_messages
        self._record_sequence(entry)
        for sub in self.subscriptions.values():
            self.schedule_dispatch(sub)
        if not self.keeps_entries():
            self._trim()
        return entry.ledger_id, entry.entry_id

    def keeps_entries(self) -> bool:
        """What holds a stored entry on Pulsar: a durable subscription's cursor (its
        backlog) or a retention policy. Without either, the managed ledger may trim the
        entry at any moment, so a subscription created later, even at the earliest position,
        has no way to get it; modelled as trimmed at once (docs/devstack-broker.md)."""
        if self.broker.retains(self.name):
            return True
        return any(sub.durable for sub in self.subscriptions.values())

    def _trim(self) -> None:
        if self.trimmed != len(self.entries):
            self.trimmed = len(self.entries)
            self.broker.record_trim(self)

    def _record_sequence(self, entry: Entry) -> None:
        if entry.last_chunk:
            previous = self.highest_sequence.get(entry.producer_name, -1)
            self.highest_sequence[entry.producer_name] = max(previous, entry.last_sequence_id)

    # subscriptions ----------------------------------------------------------------------

    def subscription(
        self, name: str, sub_type: int, *, durable: bool, start: int | None = None
    ) -> Subscription:
        """The named subscription, created at `start` (default: the end) when new."""
        sub = self.subscriptions.get(name)
        if sub is None:
            position = len(self.entries) if start is None else max(start, self.trimmed)
            sub = Subscription(self, name, sub_type, durable=durable, cursor=Cursor(position))
            self.subscriptions[name] = sub
            self.cursor_changed(sub)
        return sub

    def delete_subscription(self, name: str) -> None:
        sub = self.subscriptions.pop(name, None)
        if sub is not None:
            sub.close()
            if sub.durable:
                self.store.delete_cursor(name)
            if not self.keeps_entries():
                self._trim()  # the last cursor held the backlog; nothing does now

    def position_of(self, ledger_id: int, entry_id: int) -> int:
        """Index of the first entry at or after (ledger, entry)."""
        exact = self.index_of.get((ledger_id, entry_id))
        if exact is not None:
            return exact
        for index, entry in enumerate(self.entries):
            if (entry.ledger_id, entry.entry_id) >= (ledger_id, entry_id):
                return index
        return len(self.entries)

    def position_at_time(self, publish_time: int) -> int:
        for index, entry in enumerate(self.entries):
            if entry.publish_time >= publish_time:
                return index
        return len(self.entries)

    # hooks used by subscriptions --------------------------------------------------------

    def schedule_dispatch(self, sub: Subscription) -> None:
        self.broker.schedule_dispatch(sub)

    def cursor_changed(self, sub: Subscription) -> None:
        if sub.durable:
            self.broker.schedule_cursor_save(self, sub)

    def dispatch_paused(self) -> bool:
        return self.broker.faults.dispatch_paused

    def loop_time_for(self, wall: float) -> float:
        return asyncio.get_running_loop().time() + (wall - time.time())

    def call_at_wall(self, wall: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        loop = asyncio.get_running_loop()
        return loop.call_at(self.loop_time_for(wall), callback)

    # lifecycle --------------------------------------------------------------------------

    def close_clients(self) -> None:
        """Broker-initiated close of every producer and consumer: clients reconnect."""
        for producer in list(self.producers.values()):
            producer.peer.close_producer(producer.producer_id)
        for sub in list(self.subscriptions.values()):
            for consumer in list(sub.consumers):
                consumer.peer.close_consumer(consumer.consumer_id)

    def save_cursors(self) -> None:
        for sub in self.subscriptions.values():
            if sub.durable:
                self.store.save_cursor(sub.name, sub.snapshot())

    def close(self) -> None:
        for sub in self.subscriptions.values():
            sub.close()
        self.save_cursors()
        self.store.close()
