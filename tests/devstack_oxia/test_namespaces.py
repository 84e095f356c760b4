"""Several namespaces on one devstack Oxia server, as Pulsar uses them (`broker` and
`bookkeeper`): each has shards of its own, and a key lives in the namespace it was written
to only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

from devstack.oxia import OxiaServer, running_in_thread
from devstack.ports import free_port

from .conftest import RawStub, oxia

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAMESPACES = ("broker", "bookkeeper")


@pytest.fixture
def two() -> Iterator[OxiaServer]:
    with running_in_thread(shards=2, namespaces=NAMESPACES) as running:
        yield running


def _shards(raw: RawStub, namespace: str) -> set[int]:
    answer = next(raw.call("GetShardAssignments", namespace=namespace))
    return {one.shard for one in answer.namespaces[namespace].assignments}


def test_each_namespace_has_shards_of_its_own(two: OxiaServer) -> None:
    """Shard ids are unique across namespaces, as in Oxia, so a request's shard id alone
    says which namespace it writes."""
    raw = RawStub(two.address)
    try:
        broker, bookkeeper = (_shards(raw, name) for name in NAMESPACES)
    finally:
        raw.channel.close()
    assert (len(broker), len(bookkeeper)) == (2, 2)
    assert broker.isdisjoint(bookkeeper)
    assert list(two.service.namespaces) == list(NAMESPACES)


def test_a_key_is_only_in_the_namespace_it_was_written_to(two: OxiaServer) -> None:
    """The same key in two namespaces is two records; deleting one leaves the other."""
    clients = {name: oxia.Client(two.address, namespace=name) for name in NAMESPACES}
    try:
        clients["broker"].put("/ledgers/L1", b"broker's")
        clients["bookkeeper"].put("/ledgers/L1", b"bookkeeper's")
        assert clients["broker"].get("/ledgers/L1")[1] == b"broker's"
        assert clients["bookkeeper"].get("/ledgers/L1")[1] == b"bookkeeper's"
        clients["broker"].delete("/ledgers/L1")
        assert clients["bookkeeper"].get("/ledgers/L1")[1] == b"bookkeeper's"
        assert list(clients["broker"].list("/ledgers/", "/ledgers//")) == []
    finally:
        for client in clients.values():
            client.close()


def test_an_unknown_namespace_is_not_found(two: OxiaServer) -> None:
    raw = RawStub(two.address)
    try:
        with pytest.raises(grpc.RpcError) as caught:
            next(raw.call("GetShardAssignments", namespace="default"))
    finally:
        raw.channel.close()
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_a_namespace_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="named twice"):
        OxiaServer(namespaces=("broker", "broker"))


def test_the_command_serves_every_namespace_given() -> None:
    """`--namespace` repeated: the readiness line names them, each with its shards."""
    port = free_port()
    command = [sys.executable, "-m", "services.cli", "devstack", "oxia", "--port", str(port)]
    child = subprocess.Popen(
        [*command, "--shards", "2", "--namespace", "broker", "--namespace", "bookkeeper"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline().strip()
        expected = f"READY address=127.0.0.1:{port} shards=4 namespaces=broker,bookkeeper"
        assert ready == expected, ready
        client = oxia.Client(f"127.0.0.1:{port}", namespace="bookkeeper")
        try:
            client.put("/cli/k", b"v")
            assert client.get("/cli/k")[1] == b"v"
        finally:
            client.close()
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
