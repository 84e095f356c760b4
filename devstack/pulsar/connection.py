"""One client connection: frames in, commands dispatched in order, frames out in batches."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from tombstone.wire import pulsar_api_pb2 as _pb

from .entries import Entry
from .fastwire import message_frame
from .framing import FrameError, FrameReader, encode_command, parse_command

if TYPE_CHECKING:
    from .broker import Broker
    from .subscription import Consumer
    from .topic import Producer

log = logging.getLogger(__name__)
T = _pb.BaseCommand.Type
PROTOCOL_VERSION = 20
SERVER_VERSION = "Tombstone devstack broker"
Handler = Callable[["Connection", _pb.BaseCommand, bytes], None]


class ProtocolViolation(Exception):
    """A well-formed frame the broker does not accept here; the connection closes."""


class Connection(asyncio.Protocol):
    # Filled in by handlers.py: command type -> handler.
    handlers: ClassVar[dict[int, Handler]] = {}

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader()
        self.connected = False
        self.role: str | None = None
        """Who authenticated on CONNECT (None when the broker does not authenticate)."""
        self.protocol_version = 0
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self._out: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._heard_from = True
        self._ping_task: asyncio.Task[None] | None = None
        self._close_request_id = 0
        self.closed = False

    # transport --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.broker.connections.add(self)

    def data_received(self, data: bytes) -> None:
        try:
            for command_bytes, rest in self.reader.feed(data):
                if self.closed:
                    return
                self._handle(parse_command(command_bytes), rest)
        except (FrameError, ProtocolViolation) as exc:
            log.warning("closing connection %s: %s", self.peer_name, exc)
            self.abort()
        except Exception:
            # A bug must cost this connection only, never the broker.
            log.exception("closing connection %s after an internal error", self.peer_name)
            self.abort()

    def _handle(self, command: _pb.BaseCommand, rest: bytes) -> None:
        self._heard_from = True
        if not self.connected and command.type != T.CONNECT:
            raise ProtocolViolation(f"expected CONNECT, got {T.Name(command.type)}")
        handler = self.handlers.get(command.type)
        if handler is None:
            raise ProtocolViolation(f"unsupported command {T.Name(command.type)}")
        handler(self, command, rest)

    @property
    def ssl_object(self) -> ssl.SSLObject | None:
        """The TLS session of a `pulsar+ssl` connection (its peer certificate)."""
        if self.transport is None:
            return None
        found = self.transport.get_extra_info("ssl_object")
        return found if isinstance(found, ssl.SSLObject) else None

    @property
    def peer_name(self) -> str:
        return str(self.transport.get_extra_info("peername")) if self.transport else "?"

    def write(self, frame: bytes) -> None:
        """Queue a frame; all frames queued in one loop iteration go out in one write."""
        if self.closed:
            return
        self._out.append(frame)
        if self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_handle = None
        if self.transport is None or self.closed or not self._out:
            return
        out, self._out = self._out, []
        self.transport.write(b"".join(out))

    def send(self, command: _pb.BaseCommand) -> None:
        self.write(encode_command(command))

    def abort(self) -> None:
        """Drop the connection now; frames still buffered from the peer are not processed."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()

    def close_gracefully(self) -> None:
        """Send what is queued, then close."""
        self._flush()
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        if self._ping_task is not None:
            self._ping_task.cancel()
        for producer in list(self.producers.values()):
            producer.topic.remove_producer(producer)
        self.producers.clear()
        for consumer in list(self.consumers.values()):
            self._detach_consumer(consumer)
        self.consumers.clear()

    # keepalive --------------------------------------------------------------------------

    def start_keepalive(self) -> None:
        self._ping_task = asyncio.get_running_loop().create_task(self._keepalive())

    async def _keepalive(self) -> None:
        interval = self.broker.config.keepalive_seconds
        while not self.closed:
            self._heard_from = False
            self.send(_pb.BaseCommand(type=T.PING, ping=_pb.CommandPing()))
            await asyncio.sleep(interval)
            if not self._heard_from:
                log.warning("closing connection %s: no answer to PING", self.peer_name)
                self.abort()
                return

    # consumers and producers (the Peer protocol) -------------------------------------

    def send_message(
        self,
        consumer_id: int,
        entry: Entry,
        partition: int,
        redelivery_count: int,
        ack_set: list[int] | None,
    ) -> None:
        frame = message_frame(
            consumer_id, entry.id_bytes(partition), redelivery_count, ack_set, entry.stored
        )
        self.write(frame)

    def _next_close_id(self) -> int:
        # Broker-initiated closes need a request id; the client ignores its value.
        self._close_request_id += 1
        return self._close_request_id

    def close_consumer(self, consumer_id: int) -> None:
        consumer = self.consumers.pop(consumer_id, None)
        if consumer is not None:
            self._detach_consumer(consumer)
        close = _pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=self._next_close_id())
        self.send(_pb.BaseCommand(type=T.CLOSE_CONSUMER, close_consumer=close))

    def close_producer(self, producer_id: int) -> None:
        producer = self.producers.pop(producer_id, None)
        if producer is not None:
            producer.topic.remove_producer(producer)
        close = _pb.CommandCloseProducer(producer_id=producer_id, request_id=self._next_close_id())
        self.send(_pb.BaseCommand(type=T.CLOSE_PRODUCER, close_producer=close))

    def _detach_consumer(self, consumer: Consumer) -> None:
        sub = consumer.subscription
        if sub.remove_consumer(consumer) and not sub.durable and not sub.consumers:
            sub.topic.delete_subscription(sub.name)

    # replies ----------------------------------------------------------------------------

    def success(self, request_id: int) -> None:
        self.send(
            _pb.BaseCommand(type=T.SUCCESS, success=_pb.CommandSuccess(request_id=request_id))
        )

    def error(self, request_id: int, error: int, message: str) -> None:
        err = _pb.CommandError(request_id=request_id, error=error, message=message)  # type: ignore[arg-type]
        self.send(_pb.BaseCommand(type=T.ERROR, error=err))
