"""SUBSCRIBE, FLOW, ACK, REDELIVER, SEEK, UNSUBSCRIBE, CLOSE_CONSUMER, GET_LAST_MESSAGE_ID."""

from __future__ import annotations

from tombstone.wire import pulsar_api_pb2 as _pb

from .broker import UnknownNamespace
from .connection import Connection
from .entries import MINUS_ONE
from .names import InvalidTopicName, TopicName
from .subscription import KEY_SHARED, Consumer, SubscribedTopic, SubscriptionBusy
from .topic import Topic

T = _pb.BaseCommand.Type
EARLIEST = (MINUS_ONE, MINUS_ONE)
LATEST = ((1 << 63) - 1, (1 << 63) - 1)


def _start_position(topic: Topic, request: _pb.CommandSubscribe) -> int:
    if not request.durable and request.HasField("start_message_id"):
        return _position(topic, request.start_message_id)
    if request.initialPosition == _pb.CommandSubscribe.Earliest:
        return 0
    return len(topic.entries)


def _position(topic: SubscribedTopic, message_id: _pb.MessageIdData) -> int:
    key = (message_id.ledgerId, message_id.entryId)
    if key == EARLIEST:
        return 0
    if key == LATEST:
        return len(topic.entries)
    return topic.position_of(*key)


def on_subscribe(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.subscribe
    if request.consumer_id in conn.consumers:
        conn.success(request.request_id)  # a repeated request for a live consumer
        return
    try:
        name = TopicName.parse(request.topic)
        conn.broker.check_namespace(name)
    except (InvalidTopicName, UnknownNamespace) as exc:
        conn.error(request.request_id, _pb.TopicNotFound, str(exc))
        return
    topic = conn.broker.topic(name)
    sub = topic.subscription(
        request.subscription,
        request.subType,
        durable=request.durable,
        start=_start_position(topic, request),
    )
    ranges = None
    if request.subType == KEY_SHARED and request.keySharedMeta.hashRanges:
        ranges = [(r.start, r.end) for r in request.keySharedMeta.hashRanges]
    consumer = Consumer(
        peer=conn,
        consumer_id=request.consumer_id,
        name=request.consumer_name,
        subscription=sub,
        priority=request.priority_level,
        hash_ranges=ranges,
    )
    try:
        sub.add_consumer(consumer, request.subType)
    except SubscriptionBusy as exc:
        conn.error(request.request_id, _pb.ConsumerBusy, str(exc))
        return
    if request.HasField("schema") and topic.schema is None:
        topic.schema = request.schema
    conn.consumers[request.consumer_id] = consumer
    conn.success(request.request_id)


def on_flow(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    consumer = conn.consumers.get(command.flow.consumer_id)
    if consumer is not None:
        consumer.permits += command.flow.messagePermits
        conn.broker.schedule_dispatch(consumer.subscription)


def on_ack(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    ack = command.ack
    consumer = conn.consumers.get(ack.consumer_id)
    if consumer is not None:
        sub = consumer.subscription
        for message_id in ack.message_id:
            index = sub.topic.index_of.get((message_id.ledgerId, message_id.entryId))
            if index is None:
                continue
            ack_set = list(message_id.ack_set) or None
            if ack.ack_type == _pb.CommandAck.Cumulative:
                sub.ack_cumulative(index, ack_set)
            else:
                sub.ack(index, ack_set)
        conn.broker.schedule_dispatch(sub)
    if ack.HasField("request_id"):
        response = _pb.CommandAckResponse(consumer_id=ack.consumer_id, request_id=ack.request_id)
        conn.send(_pb.BaseCommand(type=T.ACK_RESPONSE, ackResponse=response))


def on_redeliver(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.redeliverUnacknowledgedMessages
    consumer = conn.consumers.get(request.consumer_id)
    if consumer is None:
        return
    sub = consumer.subscription
    indexes: list[int] | None = None
    if request.message_ids:
        found = (sub.topic.index_of.get((m.ledgerId, m.entryId)) for m in request.message_ids)
        indexes = [i for i in found if i is not None]
    sub.redeliver(consumer, indexes)


def on_seek(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.seek
    consumer = conn.consumers.get(request.consumer_id)
    if consumer is None:
        conn.error(request.request_id, _pb.ConsumerNotFound, f"no consumer {request.consumer_id}")
        return
    sub = consumer.subscription
    if request.HasField("message_id"):
        position = _position(sub.topic, request.message_id)
    else:
        position = sub.topic.position_at_time(request.message_publish_time)
    sub.seek(position)  # closes every consumer first: they re-subscribe at the new position
    conn.success(request.request_id)


def on_unsubscribe(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.unsubscribe
    consumer = conn.consumers.get(request.consumer_id)
    if consumer is None:
        conn.error(request.request_id, _pb.ConsumerNotFound, f"no consumer {request.consumer_id}")
        return
    sub = consumer.subscription
    if any(c is not consumer for c in sub.consumers) and not request.force:
        conn.error(request.request_id, _pb.MetadataError, "subscription has other consumers")
        return
    del conn.consumers[request.consumer_id]
    sub.remove_consumer(consumer)
    sub.topic.delete_subscription(sub.name)
    conn.success(request.request_id)


def on_close_consumer(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.close_consumer
    consumer = conn.consumers.pop(request.consumer_id, None)
    if consumer is not None:
        sub = consumer.subscription
        if sub.remove_consumer(consumer) and not sub.durable and not sub.consumers:
            sub.topic.delete_subscription(sub.name)
    conn.success(request.request_id)


def on_get_last_message_id(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.getLastMessageId
    consumer = conn.consumers.get(request.consumer_id)
    if consumer is None:
        conn.error(request.request_id, _pb.ConsumerNotFound, f"no consumer {request.consumer_id}")
        return
    topic = consumer.subscription.topic
    partition = topic.name.partition_index
    answer = _pb.CommandGetLastMessageIdResponse(request_id=request.request_id)
    last = answer.last_message_id
    if topic.entries:
        entry = topic.entries[-1]
        last.ledgerId, last.entryId = entry.ledger_id, entry.entry_id
        if entry.batched:
            last.batch_index = entry.num_messages - 1
    else:
        last.ledgerId, last.entryId = topic.ledger_id, MINUS_ONE
    last.partition = partition
    mark = consumer.subscription.cursor.mark_delete
    position = answer.consumer_mark_delete_position
    if mark > 0:
        entry = topic.entries[mark - 1]
        position.ledgerId, position.entryId = entry.ledger_id, entry.entry_id
    else:
        position.ledgerId, position.entryId = topic.ledger_id, MINUS_ONE
    position.partition = partition
    conn.send(_pb.BaseCommand(type=T.GET_LAST_MESSAGE_ID_RESPONSE, getLastMessageIdResponse=answer))
