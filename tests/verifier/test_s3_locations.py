"""Offloaded copies behind two S3 endpoints in two regions: two moto servers over HTTP, the
real ZooKeeper, the verifier's decision and the deleter's S3 backend.

The offload contexts are written as Pulsar's jcloud offloader writes them (2.7+):
`BlobStoreManagedLedgerOffloader` puts `TieredStorageConfiguration.getOffloadDriverMetadata()`
into each ledger's `offloadContext.driverMetadata` (`managedLedgerOffloadDriver`, `bucket`,
`region`, `serviceEndpoint`), taken from the namespace's `OffloadPoliciesImpl`, so two
namespaces offloading to two endpoints leave two locations in the metadata. The marker copies
that context into the PDLI. Both servers hold a bucket of the same name: only the location
the record names tells them apart.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devstack.s3 import ACCESS_KEY, SECRET_KEY, S3Server
from services.core.config import S3Config
from services.core.errors import ConfigError
from services.core.metrics import Metrics
from services.core.s3_client import S3Clients, open_s3_clients
from services.core.s3_locations import S3Location, TooManyLocations
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.s3 import open_s3_deleter
from services.deleter.ports import DeleteFailed
from services.metadata.offload import data_object_key, index_object_key
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import open_s3
from services.verifier.app import VerifierParts, build
from services.verifier.config import VerifierConfig
from services.verifier.metrics import VerifierMetrics
from services.verifier.model import Decision, SkipReason, Verdict
from services.verifier.servicer import verdict_to_proto
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.conftest import _SESSION
from tests.verifier.world import BUCKET, CLUSTER, ML, UUID, Listed, World, pdli
from tombstone.v1 import pending_delete_pb2 as pb
from tombstone.v1 import verifier_pb2 as _vf

EAST_REGION = "eu-west-1"


@pytest.fixture
def east(s3_2: S3Server) -> S3Server:
    """The second moto server: another endpoint, whose bucket is in another region."""
    return s3_2


def jcloud_driver_metadata(endpoint: str, region: str) -> dict[str, str]:
    """`TieredStorageConfiguration.getOffloadDriverMetadata()` of an `aws-s3` offloader with
    a service endpoint (S3-compatible store): the provider's enum name, then the location."""
    return {
        "managedLedgerOffloadDriver": "AWS_S3",
        "bucket": BUCKET,
        "region": region,
        "serviceEndpoint": endpoint,
    }


async def offloaded_then_trimmed(
    world: World, ledger_id: int, driver_metadata: dict[str, str]
) -> pb.PendingDeleteLedgerInfo:
    """The ML lists `ledger_id` offloaded with `driver_metadata` (as `offloadLoop` completes
    it), then trims it; the PDLI carries the offload context the marker read before the trim."""
    version = await world.ml([Listed(ledger_id, uuid=UUID, bookkeeper_deleted=True), 99])
    await world.ml([99], version=version + 1)
    message = pdli(ledger_id, tier=pb.OFFLOAD_LEDGER, uuid=UUID, bucket=None)
    message.offload_context.driver_metadata.update(driver_metadata)
    return message


async def put_objects(server: S3Server, ledger_id: int, *, region: str) -> tuple[str, str]:
    """Both objects of `ledger_id` as a 2.10+ offloader writes them, in BUCKET at `server`
    (the bucket created in `region`)."""
    keys = (data_object_key(UUID, ledger_id), index_object_key(UUID, ledger_id))
    config = {**server.client_config(), "region_name": region}
    async with _SESSION.create_client("s3", **config) as client:
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            where = {} if region == "us-east-1" else {"LocationConstraint": region}
            await client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration=where)
        for key, role in zip(keys, ("data", "index"), strict=True):
            metadata = {"role": role, "ManagedLedgerName": ML, "pulsarclustername": CLUSTER}
            await client.put_object(Bucket=BUCKET, Key=key, Body=b"x", Metadata=metadata)
    return keys


async def listed(server: S3Server) -> set[str]:
    async with _SESSION.create_client("s3", **server.client_config()) as client:
        response = await client.list_objects_v2(Bucket=BUCKET)
    return {item["Key"] for item in response.get("Contents", [])}


def two_locations(config: VerifierConfig, east: S3Server, *, allow_east: bool) -> VerifierConfig:
    extra = frozenset({east.endpoint}) if allow_east else frozenset()
    return dataclasses.replace(config, s3=dataclasses.replace(config.s3, extra_endpoints=extra))


@contextlib.asynccontextmanager
async def verifier(config: VerifierConfig, store: ZkMetadataStore) -> AsyncIterator[VerifierParts]:
    """The verifier's parts with its own per-location S3 clients (`open_s3`)."""
    async with open_s3(config.s3) as objects:
        parts = build(config, MetadataZnodeStore(store), objects, VerifierMetrics(Metrics()))
        await parts.believed.refresh()
        yield parts


async def test_each_record_is_verified_and_deleted_at_its_own_location(
    config: VerifierConfig, world: World, store: ZkMetadataStore, s3: S3Server, east: S3Server
) -> None:
    """Ledger 1 offloaded to the configured endpoint (named in its record), ledger 2 to the
    second endpoint in another region, ledger 3 by a policy naming no endpoint nor region
    (the configured ones). Each verdict names the location its record names, and the deleter
    deletes there only: copies of the same keys at the other server stay."""
    config = two_locations(config, east, allow_east=True)
    west_md = jcloud_driver_metadata(s3.endpoint, "us-east-1")
    east_md = jcloud_driver_metadata(east.endpoint + "/", EAST_REGION)  # spelled differently
    bare_md = jcloud_driver_metadata("", "")
    pdlis = [
        await offloaded_then_trimmed(world, 1, west_md),
        await offloaded_then_trimmed(world, 2, east_md),
        await offloaded_then_trimmed(world, 3, bare_md),
    ]
    await put_objects(s3, 1, region="us-east-1")
    await put_objects(s3, 3, region="us-east-1")
    decoys = await put_objects(east, 1, region=EAST_REGION)  # same keys, other endpoint
    east_keys = await put_objects(east, 2, region=EAST_REGION)
    west_keys = await listed(s3)
    async with verifier(config, store) as parts:
        verdicts = [await parts.engine.verify(p) for p in pdlis]
    assert [v.decision for v in verdicts] == [Decision.DELETE] * 3, verdicts
    evidence = [verdict_to_proto(v).offload for v in verdicts]
    assert [(e.endpoint, e.region) for e in evidence] == [
        (s3.endpoint, "us-east-1"),
        (east.endpoint, EAST_REGION),
        ("", ""),  # each service's configured location
    ]

    limits = BackendLimits(concurrency=4, per_second=1000)
    async with open_s3_deleter(config.s3, limits=limits) as deleter:
        for ledger_id, found in zip((1, 2, 3), evidence, strict=True):
            result = await deleter.delete_offloaded(ledger_id=ledger_id, evidence=found)
            assert result.evidence["region"] == (found.region or "us-east-1")
    assert await listed(s3) == set()
    assert west_keys == {
        make(UUID, i) for i in (1, 3) for make in (data_object_key, index_object_key)
    }
    assert await listed(east) == set(decoys)
    assert not set(east_keys) & await listed(east)


async def test_an_endpoint_not_allowed_is_mismatch_naming_it(
    config: VerifierConfig, world: World, store: ZkMetadataStore, east: S3Server
) -> None:
    """A record at an endpoint off TOMBSTONE_S3_ALLOWED_ENDPOINTS is not read: SKIP MISMATCH
    (dead-lettered by the deleter) with a reason naming the endpoint, as a bucket off the
    allow-list; its objects stay."""
    config = two_locations(config, east, allow_east=False)
    message = await offloaded_then_trimmed(
        world, 2, jcloud_driver_metadata(east.endpoint, EAST_REGION)
    )
    keys = await put_objects(east, 2, region=EAST_REGION)
    async with verifier(config, store) as parts:
        verdict: Verdict = await parts.engine.verify(message)
    assert (verdict.decision, verdict.skip_reason) == (Decision.SKIP, SkipReason.MISMATCH)
    assert east.endpoint in verdict.reason
    assert set(keys) == await listed(east)


async def test_the_deleter_refuses_an_endpoint_it_does_not_allow(
    config: VerifierConfig, s3: S3Server, east: S3Server
) -> None:
    """Evidence naming an endpoint off the deleter's allow-list (a verifier allowing more):
    a permanent failure naming the endpoint, and nothing is deleted there."""
    keys = await put_objects(east, 2, region=EAST_REGION)
    evidence = _vf.OffloadEvidence(
        driver_name="aws-s3",
        bucket=BUCKET,
        keys=keys,
        endpoint=east.endpoint,
        region=EAST_REGION,
    )
    limits = BackendLimits(concurrency=1, per_second=1000)
    async with open_s3_deleter(config.s3, limits=limits) as deleter:
        with pytest.raises(DeleteFailed, match=east.endpoint) as refused:
            await deleter.delete_offloaded(ledger_id=2, evidence=evidence)
    assert refused.value.permanent
    assert set(keys) == await listed(east)


def test_allowed_endpoints_are_read_canonical() -> None:
    """TOMBSTONE_S3_ALLOWED_ENDPOINTS is compared in canonical form (lowercase, no default
    port, no trailing slash); the configured endpoint is always allowed; a path is refused."""
    env = {
        "TOMBSTONE_S3_ENDPOINT_URL": "http://127.0.0.1:9000",
        "TOMBSTONE_S3_ALLOWED_ENDPOINTS": "HTTPS://S3.East.Example:443/,http://minio:80",
    }
    config = S3Config.from_env(env)
    assert config.allowed_endpoints == {
        "http://127.0.0.1:9000",
        "https://s3.east.example",
        "http://minio",
    }
    with pytest.raises(ConfigError, match="TOMBSTONE_S3_ALLOWED_ENDPOINTS"):
        S3Config.from_env({"TOMBSTONE_S3_ALLOWED_ENDPOINTS": "https://s3.example/bucket"})


async def test_clients_are_one_per_location_and_bounded(s3: S3Server, east: S3Server) -> None:
    """One client per (endpoint, region), opened on first use; a location beyond the bound
    is refused rather than evicting a client in use; all are closed together."""
    config = S3Config(access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY)
    west_loc, east_loc = S3Location(s3.endpoint, "us-east-1"), S3Location(east.endpoint, "x-1")
    clients: S3Clients
    async with open_s3_clients(config, max_locations=2) as clients:
        assert not clients.locations
        first: Any = await clients.client(west_loc)
        assert first is await clients.client(west_loc)
        assert first is not await clients.client(east_loc)
        with pytest.raises(TooManyLocations):
            await clients.client(S3Location(east.endpoint, "y-2"))
        assert list(clients.locations) == [west_loc, east_loc]
    with pytest.raises(RuntimeError, match="closed"):
        await clients.client(west_loc)
