"""PRODUCER, SEND and CLOSE_PRODUCER."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from tombstone.wire import pulsar_api_pb2 as _pb

from .broker import UnknownNamespace
from .connection import Connection
from .entries import MINUS_ONE, read_metadata
from .fastwire import send_receipt_frame
from .framing import ChecksumMismatch, FrameError, split_payload
from .names import InvalidTopicName, TopicName
from .session import SCHEMA_VERSION_ZERO
from .topic import DUPLICATE, Producer, ProducerRefused

T = _pb.BaseCommand.Type
log = logging.getLogger(__name__)


def on_producer(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.producer
    broker = conn.broker
    existing = conn.producers.get(request.producer_id)
    try:
        refusal = broker.faults.refused_producers.take()
        if refusal is not None:
            raise ProducerRefused(refusal, "producer refused by an injected fault")
        name = TopicName.parse(request.topic)
        broker.check_namespace(name)
        topic = broker.topic(name)
        if existing is not None and existing.topic is topic:
            producer = existing
        else:
            producer = Producer(
                peer=conn,
                producer_id=request.producer_id,
                name=request.producer_name or broker.new_producer_name(),
                topic=topic,
                access_mode=request.producer_access_mode,
            )
            epoch = request.topic_epoch if request.HasField("topic_epoch") else None
            topic.add_producer(producer, epoch)
            conn.producers[request.producer_id] = producer
    except (InvalidTopicName, UnknownNamespace) as exc:
        conn.error(request.request_id, _pb.TopicNotFound, str(exc))
        return
    except ProducerRefused as exc:
        conn.error(request.request_id, exc.error, str(exc))
        return
    if request.HasField("initial_subscription_name"):
        # As Java does for dead-letter producers: the subscription exists from the start.
        topic.subscription(
            request.initial_subscription_name, _pb.CommandSubscribe.Shared, durable=True, start=0
        )
    success = _pb.CommandProducerSuccess(
        request_id=request.request_id,
        producer_name=producer.name,
        last_sequence_id=topic.last_sequence_id(producer.name),
    )
    if not producer.shared:
        success.topic_epoch = topic.topic_epoch
    if request.HasField("schema"):
        if topic.schema is None:
            topic.schema = request.schema
        success.schema_version = SCHEMA_VERSION_ZERO
    conn.send(_pb.BaseCommand(type=T.PRODUCER_SUCCESS, producer_success=success))


def on_close_producer(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.close_producer
    producer = conn.producers.pop(request.producer_id, None)
    if producer is not None:
        producer.topic.remove_producer(producer)
    conn.success(request.request_id)


@dataclass(frozen=True, slots=True)
class _PendingSend:
    sequence_id: int
    rest: bytes


def on_send(conn: Connection, command: _pb.BaseCommand, rest: bytes) -> None:
    send = command.send
    producer = conn.producers.get(send.producer_id)
    if producer is None:
        # A SEND racing a broker-initiated close: the client resends after reconnecting.
        return
    failure = conn.broker.faults.failing_sends.take()
    if failure is not None:
        send_error(
            conn, send.producer_id, send.sequence_id, failure, "send failed by an injected fault"
        )
        return
    delay = conn.broker.faults.current_send_delay()
    if delay > 0 or producer.delayed:
        if producer.delayed is None:
            producer.delayed = deque()
        producer.delayed.append(_PendingSend(send.sequence_id, rest))
        if len(producer.delayed) == 1:
            asyncio.get_running_loop().create_task(_drain_delayed(conn, producer, delay))
        return
    store_send(conn, producer, send.sequence_id, rest)


async def _drain_delayed(conn: Connection, producer: Producer, delay: float) -> None:
    """Store held SENDs one after the other, each after the delay, keeping receipt order."""
    queue = producer.delayed
    assert queue is not None
    while queue:
        await asyncio.sleep(delay)
        pending = queue[0]
        assert isinstance(pending, _PendingSend)
        if conn.closed or conn.producers.get(producer.producer_id) is not producer:
            queue.clear()
            return
        try:
            store_send(conn, producer, pending.sequence_id, pending.rest)
        except FrameError:
            conn.abort()
            return
        except Exception:
            # As for frames handled inline: a bug costs this connection, not the broker.
            log.exception("closing connection %s after an internal error", conn.peer_name)
            conn.abort()
            return
        queue.popleft()
        delay = conn.broker.faults.current_send_delay()


def store_send(conn: Connection, producer: Producer, sequence_id: int, rest: bytes) -> None:
    try:
        payload = split_payload(rest)
    except ChecksumMismatch as exc:
        send_error(conn, producer.producer_id, sequence_id, _pb.ChecksumError, str(exc))
        return
    meta = read_metadata(payload.metadata)
    ledger_id, entry_id = producer.topic.publish(sequence_id, payload.stored, meta)
    if (ledger_id, entry_id) == DUPLICATE:
        ledger_id = entry_id = MINUS_ONE
    conn.write(send_receipt_frame(producer.producer_id, sequence_id, ledger_id, entry_id))


def send_error(
    conn: Connection, producer_id: int, sequence_id: int, error: int, message: str
) -> None:
    answer = _pb.CommandSendError(
        producer_id=producer_id,
        sequence_id=sequence_id,
        error=error,  # type: ignore[arg-type]
        message=message,
    )
    conn.send(_pb.BaseCommand(type=T.SEND_ERROR, send_error=answer))
