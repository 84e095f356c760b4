"""The `broker` command: options, readiness and a clean exit on SIGTERM."""

from __future__ import annotations

import pulsar
from click.testing import CliRunner

from devstack.pulsar import BrokerConfig, BrokerThread, PulsarBrokerProcess
from devstack.pulsar.cli import broker

from .conftest import ClientLog


def test_help_names_the_pulsar_default_ports() -> None:
    """--help shows the options with Pulsar's default ports."""
    result = CliRunner().invoke(broker, ["--help"])
    assert result.exit_code == 0
    assert "6650" in result.output
    assert "8080" in result.output


def test_sigterm_stops_the_broker_cleanly() -> None:
    """The command reports its ports, serves admin requests and exits 0 on SIGTERM."""
    server = PulsarBrokerProcess()
    server.start()
    try:
        assert f"READY port={server.port} admin_port={server.admin_port}" in server.log_text()
        assert server.control.drop_connections() == 0
    finally:
        code = server.stop()
        server.close()
    assert code == 0


def test_advertised_host_is_named_in_lookups(client_log: ClientLog) -> None:
    """With an advertised host, lookups send the client there: it opens a second connection
    (to localhost) beside the one to the service URL (127.0.0.1), and produces through it."""
    config = BrokerConfig(port=0, admin_port=0, advertised_host="localhost")
    with BrokerThread(config) as server:
        assert server.server is not None
        client = pulsar.Client(server.service_url, logger=client_log.logger)
        try:
            producer = client.create_producer("t")
            assert producer.send(b"x").entry_id() == 0
            assert len(server.server.broker.connections) == 2
        finally:
            client.close()
