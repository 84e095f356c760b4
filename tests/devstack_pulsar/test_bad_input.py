"""Bad bytes from one socket close that connection only; the broker keeps serving others."""

from __future__ import annotations

import socket
import struct

import pulsar
import pytest

from devstack.pulsar import BrokerConfig, BrokerThread, PulsarBrokerProcess
from devstack.pulsar.framing import FrameReader, encode_command, parse_command
from tombstone.wire import pulsar_api_pb2 as _pb

from .conftest import receive_all

T = _pb.BaseCommand.Type
CONNECT = encode_command(
    _pb.BaseCommand(
        type=T.CONNECT, connect=_pb.CommandConnect(client_version="raw", protocol_version=20)
    )
)


def _frame(command: bytes, extra: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(command) + len(extra), len(command)) + command + extra


def _closed_by_broker(sock: socket.socket) -> bool:
    """Read until EOF; True when the broker closed the socket."""
    sock.settimeout(5)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    return True


BAD_INPUTS = {
    "garbage": b"\xde\xad\xbe\xef" * 8,
    "oversize frame": struct.pack(">II", 64 * 1024 * 1024, 10) + b"x" * 100,
    "command larger than frame": struct.pack(">II", 8, 100) + b"\x08\x12\x92\x01\x00",
    "unknown command type": _frame(b"\x08\x63"),
    "unparsable command": _frame(b"\xff\xff\xff"),
    "transaction command": _frame(
        _pb.BaseCommand(type=T.NEW_TXN, newTxn=_pb.CommandNewTxn(request_id=1)).SerializeToString()
    ),
}


@pytest.mark.parametrize("bad", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_frame_closes_only_its_connection(
    bad: bytes, client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """After a bad frame on one socket, that socket is closed and a real client still works."""
    consumer = client.subscribe(topic, "sub")
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.sendall(CONNECT + bad)
        assert _closed_by_broker(sock)
    client.create_producer(topic).send(b"still-serving")
    assert [m.data() for m in receive_all(consumer, 1)] == [b"still-serving"]


def test_command_before_connect_closes_the_connection(broker: PulsarBrokerProcess) -> None:
    """Anything but CONNECT as the first command closes the connection."""
    ping = encode_command(_pb.BaseCommand(type=T.PING, ping=_pb.CommandPing()))
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.sendall(ping)
        assert _closed_by_broker(sock)


def test_truncated_frame_then_eof_leaves_the_broker_serving(
    client: pulsar.Client, topic: str, broker: PulsarBrokerProcess
) -> None:
    """A frame cut short by the peer closing its socket does not disturb the broker."""
    with socket.create_connection((broker.host, broker.port)) as sock:
        sock.sendall(CONNECT + struct.pack(">II", 100, 50) + b"\x08")
    producer = client.create_producer(topic)
    assert producer.send(b"x").entry_id() == 0


def _read_commands(sock: socket.socket, reader: FrameReader) -> list[_pb.BaseCommand]:
    data = sock.recv(65536)
    return [parse_command(command) for command, _ in reader.feed(data)] if data else []


def test_silent_peer_is_closed_after_unanswered_pings() -> None:
    """The broker PINGs every keepalive interval and closes a peer that never answers."""
    config = BrokerConfig(port=0, admin_port=0, keepalive_seconds=0.2)
    with (
        BrokerThread(config) as server,
        socket.create_connection((server.host, server.port)) as sock,
    ):
        sock.sendall(CONNECT)
        sock.settimeout(5)
        reader = FrameReader()
        seen: list[int] = []
        while commands := _read_commands(sock, reader):
            seen += [c.type for c in commands]
        assert seen[:2] == [T.CONNECTED, T.PING]


def _connected_socket(broker: PulsarBrokerProcess) -> tuple[socket.socket, FrameReader]:
    sock = socket.create_connection((broker.host, broker.port))
    sock.settimeout(5)
    sock.sendall(CONNECT)
    reader = FrameReader()
    assert [c.type for c in _read_commands(sock, reader)][:1] == [T.CONNECTED]
    return sock, reader


def _next_command(sock: socket.socket, reader: FrameReader, wanted: int) -> _pb.BaseCommand:
    """Read until a command of type `wanted` arrives (skipping the broker's PINGs)."""
    while True:
        for command in _read_commands(sock, reader):
            if command.type == wanted:
                return command


def test_ping_is_answered_with_pong(broker: PulsarBrokerProcess) -> None:
    """A client PING gets a PONG."""
    sock, reader = _connected_socket(broker)
    with sock:
        sock.sendall(encode_command(_pb.BaseCommand(type=T.PING, ping=_pb.CommandPing())))
        assert _next_command(sock, reader, T.PONG).type == T.PONG


def test_send_with_a_wrong_checksum_fails_only_that_message(
    broker: PulsarBrokerProcess, topic: str
) -> None:
    """A SEND whose checksum does not match gets SEND_ERROR ChecksumError; the connection
    stays usable."""
    sock, reader = _connected_socket(broker)
    with sock:
        producer = _pb.CommandProducer(topic=topic, producer_id=1, request_id=1)
        sock.sendall(encode_command(_pb.BaseCommand(type=T.PRODUCER, producer=producer)))
        _next_command(sock, reader, T.PRODUCER_SUCCESS)
        meta = _pb.MessageMetadata(producer_name="raw", sequence_id=0, publish_time=1)
        body = struct.pack(">I", meta.ByteSize()) + meta.SerializeToString() + b"payload"
        send = _pb.BaseCommand(type=T.SEND, send=_pb.CommandSend(producer_id=1, sequence_id=0))
        sock.sendall(_frame(send.SerializeToString(), b"\x0e\x01" + b"\x00\x00\x00\x00" + body))
        error = _next_command(sock, reader, T.SEND_ERROR).send_error
        assert (_pb.ChecksumError, 0) == (error.error, error.sequence_id)
        sock.sendall(encode_command(_pb.BaseCommand(type=T.PING, ping=_pb.CommandPing())))
        assert _next_command(sock, reader, T.PONG).type == T.PONG
