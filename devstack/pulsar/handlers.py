"""The command table: which function answers which command type."""

from __future__ import annotations

from tombstone.wire import pulsar_api_pb2 as _pb

from . import consuming, producing, session
from .connection import Connection, Handler

T = _pb.BaseCommand.Type

HANDLERS: dict[int, Handler] = {
    T.CONNECT: session.on_connect,
    T.PING: session.on_ping,
    T.PONG: session.on_pong,
    T.PARTITIONED_METADATA: session.on_partitioned_metadata,
    T.LOOKUP: session.on_lookup,
    T.GET_TOPICS_OF_NAMESPACE: session.on_get_topics,
    T.GET_SCHEMA: session.on_get_schema,
    T.CONSUMER_STATS: session.on_consumer_stats,
    T.PRODUCER: producing.on_producer,
    T.SEND: producing.on_send,
    T.CLOSE_PRODUCER: producing.on_close_producer,
    T.SUBSCRIBE: consuming.on_subscribe,
    T.FLOW: consuming.on_flow,
    T.ACK: consuming.on_ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: consuming.on_redeliver,
    T.SEEK: consuming.on_seek,
    T.UNSUBSCRIBE: consuming.on_unsubscribe,
    T.CLOSE_CONSUMER: consuming.on_close_consumer,
    T.GET_LAST_MESSAGE_ID: consuming.on_get_last_message_id,
}

Connection.handlers = HANDLERS
