"""A secured devstack broker (TLS on every listener, token and OAuth2 authentication, the
local OAuth2 issuer) in a child process, shared by the module that asks for it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.pulsar import PulsarBrokerProcess


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarBrokerProcess]:
    directory: Path = tmp_path_factory.mktemp("secured-broker")
    with PulsarBrokerProcess(secure_dir=directory / "security") as broker:
        yield broker


@pytest.fixture
def secure(secured_broker: PulsarBrokerProcess) -> PulsarBrokerProcess:
    """The secured broker, emptied of topics and faults."""
    if not secured_broker.running:
        secured_broker.start()
    secured_broker.control.reset()
    return secured_broker
