"""A subscription: its consumers, what is out for delivery, and dispatch per type."""

from __future__ import annotations

import heapq
import time
from asyncio import TimerHandle
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import crc32c as _crc

from tombstone.wire import pulsar_api_pb2 as _pb

from .cursor import Cursor
from .peer import Peer

if TYPE_CHECKING:
    from collections.abc import Callable

    from .entries import Entry
    from .names import TopicName

SubType = _pb.CommandSubscribe.SubType
EXCLUSIVE = SubType.Exclusive
SHARED = SubType.Shared
FAILOVER = SubType.Failover
KEY_SHARED = SubType.Key_Shared
HASH_RANGE = 65536


class SubscriptionBusy(Exception):
    """The subscription refuses another consumer (Exclusive, or a type mismatch)."""


def key_hash(key: bytes) -> int:
    """Where a Key_Shared key falls in 0..65535."""
    return int(_crc.crc32c(key)) % HASH_RANGE


@dataclass(eq=False)
class Consumer:
    peer: Peer
    consumer_id: int
    name: str
    subscription: Subscription
    priority: int = 0
    hash_ranges: list[tuple[int, int]] | None = None
    """Key_Shared STICKY ranges (inclusive); None lets the broker split the hash space."""
    permits: int = 0
    seq: int = 0
    """Order of arrival on the subscription (Failover and AUTO_SPLIT order by it)."""


class SubscribedTopic(Protocol):
    """What a subscription and its consumers ask of their topic (`topic.Topic`)."""

    name: TopicName
    ledger_id: int
    """The ledger its entries are written to (message ids name it)."""
    partition_index: int
    entries: list[Entry]
    trimmed: int
    """Entries below this index are gone (trimmed, or never kept)."""
    index_of: dict[tuple[int, int], int]
    """(ledger id, entry id) -> index in `entries`."""

    def schedule_dispatch(self, sub: Subscription) -> None: ...

    def cursor_changed(self, sub: Subscription) -> None: ...

    def dispatch_paused(self) -> bool: ...

    def loop_time_for(self, wall: float) -> float: ...

    def call_at_wall(self, wall: float, callback: Callable[[], None]) -> TimerHandle: ...

    def delete_subscription(self, name: str) -> None: ...

    def position_at_time(self, publish_time: int) -> int: ...

    def position_of(self, ledger_id: int, entry_id: int) -> int: ...


class Subscription:
    def __init__(
        self, topic: SubscribedTopic, name: str, sub_type: int, *, durable: bool, cursor: Cursor
    ) -> None:
        self.topic = topic
        self.name = name
        self.sub_type = sub_type
        self.durable = durable
        self.cursor = cursor
        self.consumers: list[Consumer] = []
        self.read_pos = cursor.mark_delete
        self.replay: set[int] = set()
        self.pending: dict[int, Consumer] = {}
        self._delayed: list[tuple[int, int]] = []
        self._delayed_set: set[int] = set()
        self._timer: TimerHandle | None = None
        self._rr = 0
        self._seq = 0

    # consumers -------------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer, sub_type: int) -> None:
        if self.consumers and sub_type != self.sub_type:
            raise SubscriptionBusy(f"subscription {self.name} is of another type")
        if sub_type == EXCLUSIVE and self.consumers:
            raise SubscriptionBusy(f"exclusive consumer already connected to {self.name}")
        self.sub_type = sub_type
        previous_active = self._active()
        self._seq += 1
        consumer.seq = self._seq
        self.consumers.append(consumer)
        if self.sub_type == FAILOVER and previous_active is not self._active():
            self._rewind(previous_active)

    def remove_consumer(self, consumer: Consumer) -> bool:
        """Detach a consumer; what it had not acknowledged goes back without a count.

        Returns False if it was not attached (a seek detaches consumers itself).
        """
        if consumer not in self.consumers:
            return False
        previous_active = self._active()
        self.consumers.remove(consumer)
        self._rewind(consumer)
        if self.sub_type == FAILOVER and previous_active is not self._active():
            self._rewind(previous_active)
        self.topic.schedule_dispatch(self)
        return True

    def _active(self) -> Consumer | None:
        """The consumer that receives everything on Exclusive/Failover subscriptions."""
        if not self.consumers:
            return None
        ordered = sorted(self.consumers, key=lambda c: (c.priority, c.name, c.seq))
        index = max(self.topic.partition_index, 0) % len(ordered)
        return ordered[index] if self.sub_type == FAILOVER else ordered[0]

    def _rewind(self, consumer: Consumer | None) -> None:
        for index, owner in list(self.pending.items()):
            if owner is consumer:
                del self.pending[index]
                self.replay.add(index)

    # acknowledgements -------------------------------------------------------------------

    def ack(self, index: int, ack_set: list[int] | None) -> None:
        cursor = self.cursor
        done = cursor.ack_batch_indexes(index, ack_set) if ack_set else cursor.ack(index)
        if done:
            self.pending.pop(index, None)
            self.replay.discard(index)
        self.topic.cursor_changed(self)

    def ack_cumulative(self, index: int, ack_set: list[int] | None) -> None:
        if ack_set:
            self.cursor.ack_cumulative(index - 1)
            self.cursor.ack_batch_indexes(index, ack_set)
        else:
            self.cursor.ack_cumulative(index)
        for i in [i for i in self.pending if self.cursor.is_acked(i)]:
            del self.pending[i]
        self.replay = {i for i in self.replay if not self.cursor.is_acked(i)}
        self.topic.cursor_changed(self)

    def redeliver(self, consumer: Consumer, indexes: list[int] | None) -> None:
        """REDELIVER_UNACKNOWLEDGED_MESSAGES: Shared types count, the others rewind."""
        if self.sub_type in (EXCLUSIVE, FAILOVER):
            self._rewind(consumer)
        else:
            mine = [i for i, c in self.pending.items() if c is consumer]
            chosen = (
                mine if indexes is None else [i for i in indexes if self.pending.get(i) is consumer]
            )
            for index in chosen:
                del self.pending[index]
                self.cursor.increment_redelivery(index)
                self.replay.add(index)
            self.topic.cursor_changed(self)
        self.topic.schedule_dispatch(self)

    def seek(self, position: int) -> None:
        """Close every consumer, then restart delivery at `position` with all acks forgotten.

        A non-durable subscription (a reader) survives this: its consumer re-subscribes to it
        and the new position wins over the start id the client sends again.
        """
        for consumer in list(self.consumers):
            self.consumers.remove(consumer)
            consumer.peer.close_consumer(consumer.consumer_id)
        position = max(position, self.topic.trimmed)  # trimmed entries cannot come back
        self.cursor.reset(position)
        self.read_pos = position
        self.replay.clear()
        self.pending.clear()
        self._delayed.clear()
        self._delayed_set.clear()
        self.topic.cursor_changed(self)

    def backlog(self) -> int:
        return self.cursor.backlog(len(self.topic.entries))

    # dispatch ---------------------------------------------------------------------------

    def dispatch(self) -> None:
        """Send what the consumers have permits for: replayed entries first, then new ones."""
        if not self.consumers or self.topic.dispatch_paused():
            return
        now = int(time.time() * 1000)
        for index in sorted(self.replay):
            if not self._offer(index, now):
                return
        entries = self.topic.entries
        while self.read_pos < len(entries):
            index = self.read_pos
            if not self._offer(index, now):
                return
            self.read_pos += 1

    def _offer(self, index: int, now: int) -> bool:
        """Try to deliver one entry; False when no consumer can take anything more."""
        if self.cursor.is_acked(index) or index in self.pending:
            self.replay.discard(index)
            return True
        entry = self.topic.entries[index]
        delays = self.sub_type in (SHARED, KEY_SHARED)
        if delays and entry.deliver_at > now:
            self.replay.discard(index)
            self._hold_until(index, entry.deliver_at)
            return True
        consumer = self._choose(entry.key)
        if consumer is None:
            if self.sub_type == KEY_SHARED and any(c.permits > 0 for c in self.consumers):
                self.replay.add(index)  # held for its key's consumer; others go on
                return True
            return False
        self.replay.discard(index)
        self.pending[index] = consumer
        consumer.permits -= entry.num_messages
        consumer.peer.send_message(
            consumer.consumer_id,
            entry,
            self.topic.partition_index,
            self.cursor.redelivery_counts.get(index, 0),
            self.cursor.batch_acks.get(index),
        )
        return True

    def _choose(self, key: bytes) -> Consumer | None:
        if self.sub_type in (EXCLUSIVE, FAILOVER):
            active = self._active()
            return active if active is not None and active.permits > 0 else None
        if self.sub_type == KEY_SHARED:
            owner = self._key_owner(key)
            return owner if owner is not None and owner.permits > 0 else None
        count = len(self.consumers)
        for step in range(count):
            candidate = self.consumers[(self._rr + step) % count]
            if candidate.permits > 0:
                self._rr = (self._rr + step + 1) % count
                return candidate
        return None

    def _key_owner(self, key: bytes) -> Consumer | None:
        slot = key_hash(key)
        sticky = [c for c in self.consumers if c.hash_ranges]
        if sticky:
            for consumer in sticky:
                if any(start <= slot <= end for start, end in consumer.hash_ranges or []):
                    return consumer
            return None
        ordered = sorted(self.consumers, key=lambda c: c.seq)
        return ordered[slot * len(ordered) // HASH_RANGE]

    def _hold_until(self, index: int, deliver_at: int) -> None:
        if index in self._delayed_set:
            return
        self._delayed_set.add(index)
        heapq.heappush(self._delayed, (deliver_at, index))
        self._arm_timer()

    def _arm_timer(self) -> None:
        if not self._delayed:
            return
        due = self._delayed[0][0] / 1000
        if self._timer is not None and self._timer.when() <= self.topic.loop_time_for(due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.topic.call_at_wall(due, self._release_due)

    def _release_due(self) -> None:
        self._timer = None
        now = int(time.time() * 1000)
        while self._delayed and self._delayed[0][0] <= now:
            _, index = heapq.heappop(self._delayed)
            self._delayed_set.discard(index)
            self.replay.add(index)
        self._arm_timer()
        self.dispatch()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def snapshot(self) -> dict[str, object]:
        return {"type": int(self.sub_type), "cursor": self.cursor.snapshot()}
