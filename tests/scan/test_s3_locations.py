"""The reconciler lists each bucket where it is: `--s3-location BUCKET=ENDPOINT[,REGION]`
for a bucket a namespace's own offload policies (`OffloadPoliciesImpl`) put behind another
endpoint, on two moto servers."""

from __future__ import annotations

import click
import pytest
from aiobotocore.session import get_session

from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.scan.cli.extract import parse_s3_locations
from services.scan.extract.units import BUCKET, Unit, run_unit
from tests.scan import sim
from tests.scan.test_extract_units import SPEC, _by_table

FAR = "far-offload"
KEY = "3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a6b-ledger-7"


async def test_a_bucket_is_listed_at_its_own_location(
    zk: ZooKeeperServer, s3: S3Server, s3_2: S3Server
) -> None:
    """A bucket at the second endpoint (another region) is listed there with its location,
    and is missing (a failed task, not an empty bucket) at the run's endpoint without it."""
    config = {**s3_2.client_config(), "region_name": "eu-west-1"}
    async with get_session().create_client("s3", **config) as client:
        where = {"LocationConstraint": "eu-west-1"}
        await client.create_bucket(Bucket=FAR, CreateBucketConfiguration=where)
        await client.put_object(Bucket=FAR, Key=KEY, Body=b"x")
    settings = sim.settings(zk, s3, SPEC, buckets=(SPEC.bucket, FAR), head_objects=False)
    located = sim.settings(
        zk,
        s3,
        SPEC,
        buckets=(SPEC.bucket, FAR),
        head_objects=False,
        locations=((FAR, s3_2.endpoint, "eu-west-1"),),
    )
    rows = _by_table(await run_unit(Unit(BUCKET, FAR), located))
    assert [r["key"] for r in rows["offload_objects"]] == [KEY]
    unlocated = _by_table(await run_unit(Unit(BUCKET, FAR), settings))
    assert unlocated["scan_manifest"][0]["status"] == "failed"


def test_locations_are_parsed_canonical_and_checked() -> None:
    """Endpoints are canonical, the region optional; a bucket not given with --bucket, a
    path in the endpoint or a bad region are usage errors."""
    parsed = parse_s3_locations(["b=HTTP://Minio:9000/", "c=https://s3.example,eu-west-1"], "bc")
    assert parsed == (("b", "http://minio:9000", None), ("c", "https://s3.example", "eu-west-1"))
    for bad in ("x=http://a", "b", "b=http://a/path", "b=http://a,EU WEST"):
        with pytest.raises(click.BadParameter):
            parse_s3_locations([bad], ["b"])
