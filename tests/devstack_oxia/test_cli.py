"""`tombstone devstack oxia`: it serves the real client in the foreground and stops on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from click.testing import CliRunner

from devstack.cli import devstack
from devstack.ports import free_port

from .conftest import oxia

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_help_names_oxias_default_port() -> None:
    result = CliRunner().invoke(devstack, ["oxia", "--help"])
    assert result.exit_code == 0
    assert "6648" in result.output
    assert "--shards" in result.output


def test_serves_until_sigterm_then_exits_zero() -> None:
    port = free_port()
    command = [sys.executable, "-m", "services.cli", "devstack", "oxia"]
    child = subprocess.Popen(
        [*command, "--port", str(port), "--shards", "2"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert ready.strip() == f"READY address=127.0.0.1:{port} shards=2", ready
        client = oxia.Client(f"127.0.0.1:{port}")
        try:
            client.put("/cli/k", "v")
            assert client.get("/cli/k")[1] == b"v"
            assert len(client._service_discovery.get_all_shards()) == 2
        finally:
            client.close()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 0
        assert "Oxia stopped" in child.stdout.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_busy_port_is_an_error() -> None:
    """(Through `python -m devstack.oxia`, the same command without the services' imports.)"""
    port = free_port()
    first = subprocess.Popen(
        [sys.executable, "-m", "devstack.oxia", "--port", str(port)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None
        assert first.stdout.readline().startswith("READY")
        second = subprocess.run(
            [sys.executable, "-m", "devstack.oxia", "--port", str(port)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode != 0
        assert "Oxia did not start" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
