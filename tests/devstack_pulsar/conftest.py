"""Clients of the real `pulsar-client` against the devstack broker, with their logs checked.

Every client made here logs into a handler; at teardown the test fails if the client logged
anything that means the broker broke the protocol.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator

import pulsar
import pytest

from devstack.pulsar import PulsarBrokerProcess

PROTOCOL_ERRORS = (
    "error parsing",
    "invalid message",
    "received invalid",
    "checksum",
    "unexpected command",
    "expected connected",
)


class ClientLog(logging.Handler):
    """Collects what the C++ client logs through its Python logger."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.logger = logging.getLogger(f"pulsar-client-{uuid.uuid4().hex[:8]}")
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def protocol_errors(self) -> list[str]:
        return [line for line in self.lines if any(p in line.lower() for p in PROTOCOL_ERRORS)]


@pytest.fixture
def client_log() -> Iterator[ClientLog]:
    log = ClientLog()
    yield log
    assert log.protocol_errors() == []


ClientFactory = Callable[..., pulsar.Client]


@pytest.fixture
def make_client(broker: PulsarBrokerProcess, client_log: ClientLog) -> Iterator[ClientFactory]:
    """Build sync clients on the test broker; all are closed at teardown."""
    clients: list[pulsar.Client] = []

    def make(service_url: str | None = None, **kwargs: object) -> pulsar.Client:
        kwargs.setdefault("operation_timeout_seconds", 15)
        url = service_url or broker.service_url
        client = pulsar.Client(url, logger=client_log.logger, **kwargs)
        clients.append(client)
        return client

    yield make
    for client in clients:
        # A client holding a fenced producer reports AlreadyClosed when it closes.
        with contextlib.suppress(pulsar.AlreadyClosed):
            client.close()


@pytest.fixture
def client(make_client: ClientFactory) -> pulsar.Client:
    return make_client()


@pytest.fixture
def topic() -> str:
    """A fresh topic name in public/default."""
    return f"persistent://public/default/t-{uuid.uuid4().hex[:10]}"


def receive_all(consumer: pulsar.Consumer, count: int, *, ack: bool = True) -> list[pulsar.Message]:
    """Receive exactly `count` messages (10 s each at most), acknowledging them."""
    messages = []
    for _ in range(count):
        message = consumer.receive(timeout_millis=10_000)
        if ack:
            consumer.acknowledge(message)
        messages.append(message)
    return messages


def assert_nothing_more(consumer: pulsar.Consumer, wait_millis: int = 300) -> None:
    with pytest.raises(pulsar.Timeout):
        consumer.receive(timeout_millis=wait_millis)


@pytest.fixture(autouse=True)
def _broker_stays_healthy(pulsar_broker: PulsarBrokerProcess) -> Iterator[None]:
    """Fail a test during which the broker logged an internal error."""
    before = len(pulsar_broker.log_text())
    yield
    assert "Traceback" not in pulsar_broker.log_text()[before:]
