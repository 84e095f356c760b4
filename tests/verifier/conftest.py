"""Verifier fixtures on the real ZooKeeper and moto S3 (session servers, clean per test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from aiobotocore.session import get_session

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.config import GrpcServerConfig, S3Config, ZooKeeperConfig
from services.core.metrics import Metrics
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.app import VerifierParts, build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.offload import OffloadPolicy
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import BUCKET, CLUSTER, EAST, World


@pytest.fixture
async def store(zk: ZooKeeperServer) -> AsyncIterator[ZkMetadataStore]:
    async with ZkMetadataStore.connect(
        zk.address, session_timeout=4.0, request_timeout=2.0
    ) as connected:
        yield connected


# One botocore session for the whole run: building a client from a fresh session reloads the
# service model (about a second), from a warm one it takes milliseconds.
_SESSION = get_session()


@pytest.fixture
async def s3client(s3: S3Server) -> AsyncIterator[Any]:
    """An S3 client on the clean moto server; `World.objects` creates buckets on first use."""
    async with _SESSION.create_client("s3", **s3.client_config()) as client:
        yield client


@pytest.fixture
async def east(zk: ZooKeeperServer, store: ZkMetadataStore) -> AsyncIterator[World]:
    """The declared neighbour's metadata store: a chroot of the same ZooKeeper, as a shared
    ensemble with one chroot per cluster is laid out."""
    await store.create(f"/{EAST}", b"")
    async with ZkMetadataStore.connect(
        zk.address, chroot=f"/{EAST}", session_timeout=4.0, request_timeout=2.0
    ) as theirs:
        await theirs.create("/managed-ledgers")
        yield World(theirs)


@pytest.fixture
async def world(store: ZkMetadataStore, s3client: Any) -> World:
    """A cluster with its ledgers root, `LAYOUT` (hybrid) and `/managed-ledgers`."""
    created = World(store, s3client)
    await created.bookkeeper_root()
    return created


@pytest.fixture
def config(zk: ZooKeeperServer, s3: S3Server) -> VerifierConfig:
    client = s3.client_config()
    return VerifierConfig(
        grpc=GrpcServerConfig(port=0),
        zookeeper=ZooKeeperConfig(
            servers=zk.address,
            session_timeout=timedelta(seconds=4),
            operation_timeout=timedelta(seconds=2),
        ),
        s3=S3Config(
            endpoint_url=client["endpoint_url"],
            region=client["region_name"],
            access_key_id=client["aws_access_key_id"],
            secret_access_key=client["aws_secret_access_key"],
            allowed_buckets=frozenset({BUCKET}),
        ),
        offload=OffloadPolicy(allowed_buckets=frozenset({BUCKET}), cluster_name=CLUSTER),
        shadow_scan_interval=timedelta(0),
        # The worlds are written just before each verdict: age rules have tests of their own.
        schema_min_age=timedelta(0),
        property_ledger_min_age=timedelta(0),
        shadow_clock_allowance=timedelta(0),
    )


def make_parts(config: VerifierConfig, store: MetadataStore, s3client: Any) -> VerifierParts:
    return build(
        config, MetadataZnodeStore(store), S3ObjectStore(s3client), VerifierMetrics(Metrics())
    )


@pytest.fixture
async def parts(config: VerifierConfig, store: ZkMetadataStore, s3client: Any) -> VerifierParts:
    built = make_parts(config, store, s3client)
    await built.believed.refresh()
    return built


def with_policy(config: VerifierConfig, **changes: Any) -> VerifierConfig:
    return replace(config, **changes)
