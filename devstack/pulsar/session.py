"""Handshake, keepalive, lookups and other per-connection requests."""

from __future__ import annotations

import logging

from tombstone.wire import pulsar_api_pb2 as _pb

from .authn import AUTHENTICATION_FAILED, AuthenticationFailed, authenticate
from .broker import UnknownNamespace
from .connection import PROTOCOL_VERSION, SERVER_VERSION, Connection, ProtocolViolation
from .framing import MAX_MESSAGE_SIZE
from .names import InvalidTopicName, TopicName

log = logging.getLogger(__name__)
T = _pb.BaseCommand.Type
PMR = _pb.CommandPartitionedTopicMetadataResponse
LR = _pb.CommandLookupTopicResponse
SCHEMA_VERSION_ZERO = bytes(8)


AUTHENTICATION_ERROR_REQUEST_ID = (1 << 64) - 1
"""Pulsar's `ServerCnx` answers a refused CONNECT with `Commands.newError(-1, ...)`."""


def on_connect(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    if conn.connected:
        raise ProtocolViolation("CONNECT on an established connection")
    security = conn.broker.config.security
    if security is not None and security.authenticate:
        connect = command.connect
        try:
            conn.role = authenticate(
                security, connect.auth_method_name, connect.auth_data, conn.ssl_object
            )
        except AuthenticationFailed as exc:
            # As ServerCnx.handleConnect: an ERROR with AuthenticationError, then close.
            log.warning("refusing CONNECT from %s: %s", conn.peer_name, exc)
            error = _pb.CommandError(
                request_id=AUTHENTICATION_ERROR_REQUEST_ID,
                error=_pb.AuthenticationError,
                message=AUTHENTICATION_FAILED,
            )
            conn.send(_pb.BaseCommand(type=T.ERROR, error=error))
            conn.close_gracefully()
            return
    conn.connected = True
    conn.protocol_version = min(command.connect.protocol_version, PROTOCOL_VERSION)
    connected = _pb.CommandConnected(
        server_version=SERVER_VERSION,
        protocol_version=conn.protocol_version,
        max_message_size=MAX_MESSAGE_SIZE,
    )
    conn.send(_pb.BaseCommand(type=T.CONNECTED, connected=connected))
    conn.start_keepalive()


def on_ping(conn: Connection, _command: _pb.BaseCommand, _rest: bytes) -> None:
    conn.send(_pb.BaseCommand(type=T.PONG, pong=_pb.CommandPong()))


def on_pong(conn: Connection, _command: _pb.BaseCommand, _rest: bytes) -> None:
    """Any command counts as an answer to our PING (recorded by the connection)."""


def on_partitioned_metadata(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.partitionMetadata
    answer = PMR(request_id=request.request_id)
    try:
        name = TopicName.parse(request.topic)
        conn.broker.check_namespace(name)
        answer.partitions = conn.broker.partitions_of(name)
        answer.response = PMR.Success
    except (InvalidTopicName, UnknownNamespace) as exc:
        answer.response = PMR.Failed
        answer.error = _pb.TopicNotFound
        answer.message = str(exc)
    conn.send(
        _pb.BaseCommand(type=T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=answer)
    )


def on_lookup(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.lookupTopic
    answer = LR(request_id=request.request_id)
    listener = request.advertised_listener_name
    try:
        name = TopicName.parse(request.topic)
        conn.broker.check_namespace(name)
        if listener:
            answer.response = LR.Failed
            answer.error = _pb.ServiceNotReady
            answer.message = f"the broker do not have {listener} listener"
        elif conn.ssl_object is not None:
            # One listener, the TLS one: the client reads brokerServiceUrlTls.
            address = f"{_advertised_host(conn)}:{conn.broker.port}"
            answer.brokerServiceUrl = f"pulsar://{address}"
            answer.brokerServiceUrlTls = f"pulsar+ssl://{address}"
            answer.response = LR.Connect
            answer.authoritative = True
            answer.proxy_through_service_url = False
        else:
            answer.brokerServiceUrl = f"pulsar://{_advertised_host(conn)}:{conn.broker.port}"
            answer.response = LR.Connect
            answer.authoritative = True
            answer.proxy_through_service_url = False
    except (InvalidTopicName, UnknownNamespace) as exc:
        answer.response = LR.Failed
        answer.error = _pb.TopicNotFound
        answer.message = str(exc)
    conn.send(_pb.BaseCommand(type=T.LOOKUP_RESPONSE, lookupTopicResponse=answer))


def _advertised_host(conn: Connection) -> str:
    """The configured host, or the address the client reached when listening on all of them."""
    config = conn.broker.config
    if config.advertised_host:
        return config.advertised_host
    if config.host in ("0.0.0.0", "::", "") and conn.transport is not None:
        return str(conn.transport.get_extra_info("sockname")[0])
    return config.host


def on_get_topics(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.getTopicsOfNamespace
    topics = conn.broker.topics_of_namespace(request.namespace)
    mode = request.mode
    if mode == _pb.CommandGetTopicsOfNamespace.PERSISTENT:
        topics = [t for t in topics if t.startswith("persistent://")]
    elif mode == _pb.CommandGetTopicsOfNamespace.NON_PERSISTENT:
        topics = [t for t in topics if t.startswith("non-persistent://")]
    answer = _pb.CommandGetTopicsOfNamespaceResponse(request_id=request.request_id, topics=topics)
    conn.send(
        _pb.BaseCommand(
            type=T.GET_TOPICS_OF_NAMESPACE_RESPONSE, getTopicsOfNamespaceResponse=answer
        )
    )


def on_get_schema(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.getSchema
    answer = _pb.CommandGetSchemaResponse(request_id=request.request_id)
    topic = conn.broker.topics.get(request.topic)
    if topic is not None and topic.schema is not None:
        answer.schema.CopyFrom(topic.schema)
        answer.schema_version = SCHEMA_VERSION_ZERO
    else:
        answer.error_code = _pb.TopicNotFound
        answer.error_message = f"no schema for {request.topic}"
    conn.send(_pb.BaseCommand(type=T.GET_SCHEMA_RESPONSE, getSchemaResponse=answer))


def on_consumer_stats(conn: Connection, command: _pb.BaseCommand, _rest: bytes) -> None:
    request = command.consumerStats
    answer = _pb.CommandConsumerStatsResponse(request_id=request.request_id)
    consumer = conn.consumers.get(request.consumer_id)
    if consumer is None:
        answer.error_code = _pb.ConsumerNotFound
        answer.error_message = f"no consumer {request.consumer_id}"
    else:
        answer.consumerName = consumer.name
        answer.availablePermits = max(consumer.permits, 0)
        answer.msgBacklog = consumer.subscription.backlog()
    conn.send(_pb.BaseCommand(type=T.CONSUMER_STATS_RESPONSE, consumerStatsResponse=answer))
