"""A trimmed cluster with PDLIs on the system topic and a running verifier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZooKeeperServer
from tests.deleter.stack import (
    SMALL_SPEC,
    create_topics,
    mark_trims,
    running_marker,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import objects_in_s3


@dataclass
class Trimmed:
    model: ClusterModel
    marked: dict[int, set[int]]
    objects_before: set[str]
    verifier: str


@pytest.fixture
async def cluster(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> AsyncIterator[tuple[ClusterModel, set[str], str]]:
    """A simulated cluster (not trimmed yet) and a verifier on it."""
    create_topics(broker)
    model = await write_cluster(zk, s3, SMALL_SPEC)
    before = objects_in_s3(s3)
    async with running_verifier(zk, s3) as verifier:
        yield model, before, verifier


@pytest.fixture
async def trimmed(
    cluster: tuple[ClusterModel, set[str], str], zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> Trimmed:
    """Every topic trimmed through the marker: its PDLIs wait on the system topic."""
    model, before, verifier = cluster
    async with running_marker(zk, broker, verifier) as marker:
        marked = await mark_trims(marker, model)
    return Trimmed(model, marked, before, verifier)
