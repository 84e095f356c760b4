"""The S3 offload backend against moto's S3 server, through the fault-injecting proxy."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from devstack.s3 import S3Server
from devstack.s3_faults import S3FaultProxy
from services.core.config import S3Config
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.s3 import S3OffloadDeleter, open_s3_deleter
from services.deleter.ports import DeleteFailed
from tombstone.v1 import verifier_pb2 as _vf

BUCKET = "offload"
UUID = "0b4c3a52-5d1e-4c55-9a3b-1f2e3d4c5b6a"


def keys(ledger_id: int) -> list[str]:
    return [f"{UUID}-ledger-{ledger_id}", f"{UUID}-ledger-{ledger_id}-index"]


def evidence(ledger_id: int, bucket: str = BUCKET) -> _vf.OffloadEvidence:
    return _vf.OffloadEvidence(driver_name="aws-s3", bucket=bucket, keys=keys(ledger_id))


@pytest.fixture
async def proxy(s3: S3Server) -> AsyncIterator[S3FaultProxy]:
    async with S3FaultProxy(s3.endpoint) as p:
        yield p


@pytest.fixture
def bucket(s3: S3Server) -> object:
    client = boto3.client("s3", **s3.client_config())
    client.create_bucket(Bucket=BUCKET)
    return client


def put(client: object, ledger_ids: range | list[int]) -> None:
    for ledger_id in ledger_ids:
        for key in keys(ledger_id):
            client.put_object(Bucket=BUCKET, Key=key, Body=b"x")  # type: ignore[attr-defined]


def listed(client: object) -> set[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)  # type: ignore[attr-defined]
    return {item["Key"] for page in pages for item in page.get("Contents", [])}


def proxied(proxy: S3FaultProxy, s3: S3Server) -> S3Config:
    return S3Config(
        endpoint_url=proxy.endpoint,
        access_key_id=s3.client_config()["aws_access_key_id"],
        secret_access_key=s3.client_config()["aws_secret_access_key"],
        allowed_buckets=frozenset({BUCKET}),
    )


@pytest.fixture
async def deleter(proxy: S3FaultProxy, s3: S3Server) -> AsyncIterator[S3OffloadDeleter]:
    limits = BackendLimits(concurrency=1, per_second=1000)
    async with open_s3_deleter(proxied(proxy, s3), limits=limits) as d:
        yield d


@pytest.fixture
async def listing(proxy: S3FaultProxy, s3: S3Server) -> AsyncIterator[S3OffloadDeleter]:
    """A deleter that also lists each ledger's keys after its delete, one key a page."""
    limits = BackendLimits(concurrency=1, per_second=1000)
    config = proxied(proxy, s3)
    async with open_s3_deleter(
        config, limits=limits, confirm_by_listing=True, list_page_size=1
    ) as d:
        yield d


async def test_deletes_both_objects_and_leaves_others(
    deleter: S3OffloadDeleter, bucket: object
) -> None:
    """Both objects of the ledger are gone; another ledger's objects stay."""
    put(bucket, [1, 10])
    result = await deleter.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert set(keys(10)) == listed(bucket)
    assert keys(1) == result.evidence["keys"]


async def test_absent_objects_count_as_deleted(deleter: S3OffloadDeleter, bucket: object) -> None:
    """Deleting objects that do not exist succeeds ("not found" = deleted)."""
    result = await deleter.delete_offloaded(ledger_id=3, evidence=evidence(3))
    assert result.tier.value == "s3"


async def test_concurrent_ledgers_share_delete_objects_requests(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """40 concurrent ledgers (80 keys) go out in fewer DeleteObjects requests than ledgers."""
    put(bucket, range(40))
    await asyncio.gather(
        *(deleter.delete_offloaded(ledger_id=i, evidence=evidence(i)) for i in range(40))
    )
    assert set() == listed(bucket)
    assert proxy.requests["DeleteObjects"] < 40


async def test_disallowed_bucket_is_a_permanent_failure(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """A bucket outside the allowed set is never touched."""
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_offloaded(ledger_id=1, evidence=evidence(1, bucket="other"))
    assert (failure.value.permanent, proxy.requests["DeleteObjects"]) == (True, 0)


async def test_key_of_another_ledger_is_refused(deleter: S3OffloadDeleter, bucket: object) -> None:
    """Evidence keys must name the PDLI's ledger; nothing is deleted otherwise."""
    put(bucket, [2])
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_offloaded(ledger_id=1, evidence=evidence(2))
    assert failure.value.permanent
    assert set(keys(2)) == listed(bucket)


async def test_server_errors_are_transient(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """503 SlowDown on every DeleteObjects is a transient failure and an outage (the deleter
    pauses on it); objects stay."""
    put(bucket, [1])
    proxy.fail(status=503, code="SlowDown", operation="DeleteObjects")
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert (failure.value.permanent, failure.value.outage) == (False, True)
    assert set(keys(1)) == listed(bucket)


async def test_access_denied_is_permanent(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """403 AccessDenied will not heal by retrying: a permanent failure."""
    proxy.fail(status=403, code="AccessDenied", operation="DeleteObjects")
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert (failure.value.permanent, failure.value.outage) == (True, False)


async def test_probe_answers_while_s3_answers_and_fails_without_it(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """The outage probe (HEAD of an allowed bucket) passes on any answer but a 5xx."""
    await deleter.probe()
    proxy.fail(status=403, code="AccessDenied", operation="HeadBucket")
    await deleter.probe()  # refused, but S3 answered: not an outage
    proxy.fail(status=503, code="ServiceUnavailable", operation="HeadBucket")
    with pytest.raises(ClientError):
        await deleter.probe()


async def test_failed_confirmation_listing_is_not_success(
    listing: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """If absence cannot be confirmed (listing fails), the delete is not reported done."""
    put(bucket, [1])
    proxy.fail(status=500, code="InternalError", operation="ListObjects")
    with pytest.raises(DeleteFailed) as failure:
        await listing.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert not failure.value.permanent


async def test_per_key_results_are_the_proof_without_a_listing(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """By default a delete is done on DeleteObjects' per-key answers: no listing is made."""
    put(bucket, range(5))
    await asyncio.gather(
        *(deleter.delete_offloaded(ledger_id=i, evidence=evidence(i)) for i in range(5))
    )
    assert (set(), 0) == (listed(bucket), proxy.requests["ListObjects"])


async def test_a_per_key_error_fails_only_its_ledger(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """Two ledgers in one DeleteObjects; the index of ledger 1 comes back AccessDenied: ledger
    1 fails (permanent, naming the key), ledger 2 is done."""
    put(bucket, [1, 2])
    proxy.answer_deletes(errors={keys(1)[1]: "AccessDenied"})
    one, two = await asyncio.gather(
        deleter.delete_offloaded(ledger_id=1, evidence=evidence(1)),
        deleter.delete_offloaded(ledger_id=2, evidence=evidence(2)),
        return_exceptions=True,
    )
    assert isinstance(one, DeleteFailed)
    assert (
        one.permanent,
        keys(1)[1] in one.reason,
        isinstance(two, BaseException),
    ) == (True, True, False)
    assert proxy.requests["DeleteObjects"] == 1


async def test_a_per_key_internal_error_is_an_outage(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """A key answered InternalError: the service failed, not the request (the deleter pauses)."""
    put(bucket, [1])
    proxy.answer_deletes(errors={keys(1)[0]: "InternalError"})
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert (failure.value.permanent, failure.value.outage) == (False, True)


async def test_a_key_the_answer_leaves_out_is_not_deleted(
    deleter: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """A key named neither `Deleted` nor failed is not settled: a transient failure, retried
    (never taken as deleted)."""
    put(bucket, [1])
    proxy.answer_deletes(unreported={keys(1)[1]})
    with pytest.raises(DeleteFailed) as failure:
        await deleter.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert (
        failure.value.permanent,
        failure.value.outage,
        "Unreported" in failure.value.reason,
    ) == (False, False, True)


async def test_a_confirming_listing_reads_every_page(
    listing: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """A store that answers `Deleted` and keeps the objects: the listing (one key a page)
    finds the index object on its second page, behind another key of the same prefix, and
    the delete is not reported done."""
    client: Any = bucket
    client.put_object(Bucket=BUCKET, Key=keys(1)[1], Body=b"x")
    client.put_object(Bucket=BUCKET, Key=f"{keys(1)[0]}-a", Body=b"x")  # sorts before -index
    proxy.answer_deletes(carried_out=False)
    with pytest.raises(DeleteFailed) as failure:
        await listing.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert (keys(1)[1] in failure.value.reason, proxy.requests["ListObjects"]) == (True, 2)


async def test_a_confirming_listing_passes_once_the_keys_are_gone(
    listing: S3OffloadDeleter, bucket: object, proxy: S3FaultProxy
) -> None:
    """The listing follows the pages past other keys of the prefix and confirms absence."""
    client: Any = bucket
    put(bucket, [1])
    others = {f"{keys(1)[0]}{suffix}" for suffix in ("-a", "-b")}
    for key in others:
        client.put_object(Bucket=BUCKET, Key=key, Body=b"x")
    await listing.delete_offloaded(ledger_id=1, evidence=evidence(1))
    assert (others, 2) == (listed(bucket), proxy.requests["ListObjects"])
