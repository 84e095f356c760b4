"""A cluster offloading to two S3 locations: Pulsar's per-namespace offload policies
(`OffloadPoliciesImpl`: `s3ManagedLedgerOffloadBucket`, `...Region`, `...ServiceEndpoint`) put
some namespaces' ledgers in another bucket at another endpoint and region, and the blob-store
offloader (`BlobStoreManagedLedgerOffloader.offload`) writes the context's `driverMetadata`
from that policy. Written into two real S3 servers and read back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from devstack.s3 import S3Server
from devstack.simulator.readback import expected, read_cluster
from devstack.simulator.s3 import open_object_stores
from devstack.simulator.spec import ClusterSpec
from devstack.simulator.writer import write_cluster
from services.core.errors import InvalidArgument
from services.metadata import ZkMetadataStore
from services.metadata.offload import PROP_BUCKET, PROP_REGION, PROP_SERVICE_ENDPOINT
from tests.devstack_sim.conftest import SMALL

WEST = "pulsar-offload-west"


@pytest.fixture(scope="module")
def west() -> Iterator[S3Server]:
    with S3Server(region="us-west-2") as server:
        yield server


def _two(spec: ClusterSpec, west: S3Server) -> ClusterSpec:
    return replace(
        spec,
        namespaces_per_tenant=4,
        offloaded_share=0.6,
        second_bucket=WEST,
        second_region=west.region,
        second_endpoint=west.endpoint,
        second_location_share=0.5,
    )


async def test_each_namespace_offloads_to_its_location_and_reads_back(
    store: ZkMetadataStore, s3: S3Server, west: S3Server
) -> None:
    spec = _two(SMALL, west)
    routes = {WEST: west.client_config()}
    async with open_object_stores(s3.client_config(), routes) as objects:
        model = await write_cluster(spec, store=store, s3_client=objects, concurrency=32)
        back = await read_cluster(store, s3_client=objects, buckets=(spec.bucket, WEST))
    assert expected(model) == back
    by_bucket = {obj.bucket for obj in model.objects.values()}
    assert by_bucket == {spec.bucket, WEST}
    offloads = [
        (ml.name, info.offload)
        for ml in model.managed_ledgers.values()
        for info in ml.ledgers
        if info.offload is not None and info.offload.driver_properties
    ]
    assert offloads
    for ml_name, offload in offloads:
        props = dict(offload.driver_properties)
        at_west = props[PROP_BUCKET] == WEST
        assert props[PROP_REGION] == ("us-west-2" if at_west else spec.region), ml_name
        assert props[PROP_SERVICE_ENDPOINT] == (west.endpoint if at_west else ""), ml_name
    # Each object is where its location's server keeps it, and only there.
    async with open_object_stores(west.client_config()) as only_west:
        assert set(await only_west.list_keys(bucket=WEST)) == {
            key for key, obj in model.objects.items() if obj.bucket == WEST
        }


def test_a_second_location_needs_its_own_bucket() -> None:
    with pytest.raises(InvalidArgument, match="second_bucket"):
        replace(SMALL, second_location_share=0.5)
    with pytest.raises(InvalidArgument, match="second_bucket"):
        replace(SMALL, second_location_share=0.5, second_bucket=SMALL.bucket)


def test_without_a_second_location_the_model_is_unchanged() -> None:
    """The location is drawn from the namespace's name, not the generator: turning it off
    gives the model of the same seed without it."""
    from devstack.simulator.generate import build_model

    plain = build_model(SMALL)
    off = build_model(replace(SMALL, second_bucket=WEST, second_location_share=0.0))
    assert plain.managed_ledgers == off.managed_ledgers
    assert plain.objects.keys() == off.objects.keys()
