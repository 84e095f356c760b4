"""The CI slice of the gRPC fuzz campaign (docs/fuzz.md): 1,000 generated calls per service
against the real marker, verifier and deleter processes, on the real ZooKeeper, devstack
broker and moto S3 of the test session. `make fuzz` runs the full 10,000 per service."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from hypothesis import given, settings

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from tests.fuzz.run import campaign, summary
from tests.fuzz.services import SURFACES
from tests.fuzz.strategies import HOSTILE_NAMES, messages

SLICE = 1_000


@pytest.mark.slow
@pytest.mark.timeout(420)  # about 2 minutes; room for a machine loaded several times over
async def test_fuzz_slice(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, tmp_path: Path
) -> None:
    """No crash, no hang, no undocumented status, no write by a rejected call."""
    outcomes = await campaign(zk, s3, broker, tmp_path, requests=SLICE)
    problems = [f"{o.service}: {p}" for o in outcomes for p in o.crashes + o.unexpected]
    assert not problems, "\n".join([summary(outcomes), *problems[:40]])
    assert {o.service for o in outcomes} == set(SURFACES)
    assert all(o.requests >= SLICE for o in outcomes), summary(outcomes)


def test_every_request_field_type_is_generated() -> None:
    """The descriptor walk reaches every field of every request, nested ones included."""
    for surface in SURFACES.values():
        for descriptor in surface.methods.values():
            assert _fields_seen(descriptor) == {f.name for f in descriptor.fields}
    assert "%2e%2e" in HOSTILE_NAMES
    assert "\x00" in HOSTILE_NAMES


def _fields_seen(descriptor: Descriptor) -> set[str]:
    seen: set[str] = set()

    @settings(max_examples=50, database=None, deadline=None)
    @given(messages(descriptor))
    def collect(message: Message) -> None:
        seen.update(f.name for f, _ in message.ListFields())

    collect()
    return seen
