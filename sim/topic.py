"""In-memory system topic: partitions, one Shared subscription, PIP-6 dedup, the backstop.

Modelled on the broker and client behaviour the deleter relies on:
- a message is routed to a partition by its key (`partition_key`), stored in order, and
  dispatched to any waiting consumer of the Shared subscription (the partition drawn by the
  scheduler, oldest pending message of it first);
- an acknowledgement is per message on the subscription (whoever holds it); a lost ack is a
  broker disconnect: the consumer's unacknowledged messages are redelivered to anyone, with a
  higher redelivery count, while the consumer may still be working on them;
- `release` is a negative ack: redelivered after `nack_delay`; a consumer crash redelivers
  what it held; past `max_redeliveries` the client's dead-letter policy moves the message to
  the DLQ (the backstop) instead of delivering it;
- a producer is named; the broker drops a message whose sequence id is not above the last one
  stored for that name (PIP-6), so the client's own resend after a lost answer is stored once;
  a producer that restarts continues from the broker's last sequence id;
- a message published while the topic has no subscription and no retention policy is not kept
  for a subscription created later (`ManagedLedgerImpl` trims what no cursor holds; the
  devstack broker drops it too, `Broker.retains` in `devstack/pulsar/broker.py`): the first
  consumer's subscribe creates the subscription, and only what is published afterwards
  reaches it.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from services.core.errors import Unavailable
from services.systopic.consumer import IncomingMessage
from services.systopic.dead_letter import CLIENT_ORIGIN_PROPERTY
from services.systopic.ports import OutgoingMessage, SendResult
from sim.scheduler import Fault, Scheduler

PENDING, DELIVERED, ACKED, DROPPED = "pending", "delivered", "acked", "dropped"


@dataclass
class Entry:
    message_id: str
    payload: bytes
    properties: dict[str, str]
    key: str
    publish_time_ms: int
    producer: str
    state: str = PENDING
    holder: Consumer | None = None
    redelivery_count: int = 0
    available_at: float = 0.0
    deliveries: int = 0


@dataclass
class Topic:
    """One (partitioned) topic with one Shared subscription."""

    name: str
    sched: Scheduler
    partitions: int = 1
    max_redeliveries: int = 5
    nack_delay: float = 1.0
    backstop: Topic | None = None
    """The client's dead-letter topic (the DLQ), None for the DLQ itself."""
    log: list[list[Entry]] = field(default_factory=list)
    last_sequence: dict[str, int] = field(default_factory=dict)
    on_append: Callable[[Entry], None] | None = None
    """Called with each stored message (the checks follow retry chains with it)."""
    subscribed: bool = True
    """Whether the deleters' durable subscription exists (a consumer's subscribe creates it)."""
    retained: bool = True
    """Whether a retention policy keeps what no subscription holds (`tombstone setup` sets one)."""
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    _ledger: int = 0

    def __post_init__(self) -> None:
        self.log = [[] for _ in range(self.partitions)]

    # --- broker side -----------------------------------------------------------------------

    def append(self, message: OutgoingMessage, *, producer: str, sequence_id: int) -> str | None:
        """Store; None when PIP-6 deduplication dropped it as a resend."""
        if sequence_id <= self.last_sequence.get(producer, -1):
            return None
        self.last_sequence[producer] = sequence_id
        partition = zlib.crc32(message.partition_key.encode()) % self.partitions
        entries = self.log[partition]
        entry = Entry(
            message_id=f"{self.name}:{partition}:{len(entries)}",
            payload=message.payload,
            properties=dict(message.properties),
            key=message.partition_key,
            publish_time_ms=self.sched.now_ms(),
            producer=producer,
            available_at=self.sched.now(),
        )
        entries.append(entry)
        if not self.subscribed and not self.retained:
            entry.state = DROPPED
            self.sched.log(f"{entry.message_id} dropped: no subscription, no retention")
            return entry.message_id  # the broker's receipt: it did store the message
        if self.on_append is not None:
            self.on_append(entry)
        if self.backstop is None:
            reason = message.properties.get("deadLetterReason", "backstop")
            self.sched.log(f"dead-lettered key={message.partition_key} ({reason})")
        self._wake()
        return entry.message_id

    def entries(self) -> list[Entry]:
        return [e for part in self.log for e in part]

    def unacked(self) -> list[Entry]:
        return [e for e in self.entries() if e.state not in (ACKED, DROPPED)]

    def redeliver(self, entry: Entry, delay: float = 0.0) -> None:
        if entry.state == ACKED:
            return
        entry.state, entry.holder = PENDING, None
        entry.redelivery_count += 1
        entry.available_at = self.sched.now() + delay
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._wake)
        self._wake()

    def drop_consumer(self, consumer: Consumer) -> None:
        """The consumer's connection is gone: what it held is redelivered."""
        for entry in self.entries():
            if entry.holder is consumer and entry.state == DELIVERED:
                self.redeliver(entry)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _next(self) -> Entry | None:
        now = self.sched.now()
        heads = []
        for part in self.log:
            for entry in part:
                if entry.state == PENDING and entry.available_at <= now:
                    heads.append(entry)
                    break
        if not heads:
            return None
        return heads[self.sched.rng.randrange(len(heads))]

    async def take(self, consumer: Consumer) -> Entry:
        while True:
            entry = self._next()
            if entry is not None:
                if entry.redelivery_count > self.max_redeliveries and self.backstop is not None:
                    self._to_backstop(entry)
                    continue
                entry.state, entry.holder = DELIVERED, consumer
                entry.deliveries += 1
                return entry
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter

    def _to_backstop(self, entry: Entry) -> None:
        assert self.backstop is not None
        properties = {**entry.properties, CLIENT_ORIGIN_PROPERTY: entry.message_id}
        copy = OutgoingMessage(entry.payload, entry.key, properties)
        self.backstop.append(copy, producer=f"{self.name}-backstop", sequence_id=self._ledger)
        self._ledger += 1
        entry.state, entry.holder = ACKED, None
        self.sched.log(f"backstop {entry.message_id} -> {self.backstop.name}")


class Consumer:
    """One deleter's consumer on one topic: the `MessageSource` port."""

    def __init__(self, topic: Topic, name: str) -> None:
        self._topic = topic
        self._sched = topic.sched
        self.name = name
        self.closed = False
        topic.subscribed = True  # subscribing creates the durable subscription

    @property
    def topic(self) -> str:
        return self._topic.name

    async def receive(self) -> IncomingMessage:
        entry = await self._topic.take(self)
        return IncomingMessage(
            payload=entry.payload,
            properties=dict(entry.properties),
            message_id=entry.message_id,
            topic=self._topic.name,
            redelivery_count=entry.redelivery_count,
            publish_time_ms=entry.publish_time_ms,
            handle=entry,
        )

    async def acknowledge(self, message: IncomingMessage) -> None:
        entry = message.handle
        assert isinstance(entry, Entry)
        fault = await self._sched.io(f"ack[{self.name}] {entry.message_id}")
        if self.closed:
            return
        if fault is not Fault.BEFORE and fault is not Fault.ERROR:
            entry.state, entry.holder = ACKED, None
            self._sched.log(f"acked {entry.message_id} key={entry.key}")
        if fault is not Fault.NONE:
            # Acks are fire-and-forget: a dropped connection loses them silently and the broker
            # redelivers everything this consumer held.
            self._topic.drop_consumer(self)

    async def release(self, message: IncomingMessage) -> None:
        entry = message.handle
        assert isinstance(entry, Entry)
        if not self.closed and entry.state != ACKED:
            self._topic.redeliver(entry, self._topic.nack_delay)

    async def close(self) -> None:
        self.closed = True
        self._topic.drop_consumer(self)


class Producer:
    """A named producer: the `IntentPublisher` port, with the client's resend and PIP-6."""

    def __init__(self, topic: Topic, name: str) -> None:
        self._topic = topic
        self._sched = topic.sched
        self._name = name
        # A (re)started producer asks the broker for its last sequence id.
        self._sequence = topic.last_sequence.get(name, -1)
        self.closed = False

    @property
    def producer_name(self) -> str:
        return self._name

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        pending = [self._send(m) for m in messages]
        return list(await asyncio.gather(*pending))

    async def _send(self, message: OutgoingMessage) -> SendResult:
        fault = await self._sched.io(f"send[{self._name}] key={message.partition_key}")
        if self.closed:
            raise Unavailable("producer closed")
        if fault is Fault.BEFORE or fault is Fault.ERROR:
            return SendResult(error=f"send failed ({fault.value})")
        # One connection keeps a producer's messages in order: ids increase as they arrive.
        self._sequence += 1
        sequence_id = self._sequence
        message_id = self._topic.append(message, producer=self._name, sequence_id=sequence_id)
        if fault is Fault.AFTER:
            if self._sched.chance(0.5):
                return SendResult(error="send timed out")  # stored, but the client gave up
            # The client resends with the same sequence id: PIP-6 drops the copy.
            again = self._topic.append(message, producer=self._name, sequence_id=sequence_id)
            assert again is None
        if message_id is None:
            return SendResult(error="duplicate")
        return SendResult(message_id=message_id)

    async def close(self) -> None:
        self.closed = True


class SubscriptionAdmin:
    """The one admin call the subscription watch makes (`PulsarAdmin.subscriptions`), answered
    from `topic`: the deleters' subscription is on every partition once it exists. The call can
    fail or lose its answer as any port call: an unknown answer, never "missing"."""

    def __init__(self, topic: Topic, subscription: str) -> None:
        self._topic = topic
        self._subscription = subscription

    async def subscriptions(self, name: str) -> list[str]:
        fault = await self._topic.sched.io(f"admin subscriptions {name}")
        if fault is not Fault.NONE:
            raise Unavailable(f"admin call on {name} failed ({fault.value})")
        return [self._subscription] if self._topic.subscribed else []
