"""How many HEADs an offloaded ledger costs, and that fewer HEADs decide nothing differently.

Real moto S3 behind the fault-injecting proxy (`devstack.s3_faults`), which counts requests
by operation. The objects are written as `BlobStoreManagedLedgerOffloader` of Pulsar 2.10+
writes them: both with `ManagedLedgerName`, `pulsarclustername` and `role` (`World.objects`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from devstack.s3 import S3Server
from devstack.s3_faults import S3FaultProxy
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.config import VerifierConfig
from services.verifier.model import Decision, SkipReason
from tests.verifier.conftest import _SESSION, make_parts
from tests.verifier.world import BUCKET, ML, OTHER_ML, UUID, World, pdli
from tombstone.v1 import pending_delete_pb2 as pb

OFF: dict[str, Any] = {"tier": pb.OFFLOAD_LEDGER, "uuid": UUID}


@pytest.fixture
async def proxy(s3: S3Server) -> AsyncIterator[S3FaultProxy]:
    async with S3FaultProxy(s3.endpoint) as p:
        yield p


@pytest.fixture
async def parts(
    config: VerifierConfig, store: ZkMetadataStore, s3: S3Server, proxy: S3FaultProxy
) -> AsyncIterator[Any]:
    """The verifier's decision reading S3 through the proxy (the world writes directly)."""
    settings = {**s3.client_config(), "endpoint_url": proxy.endpoint}
    async with _SESSION.create_client("s3", **settings) as client:
        built = make_parts(config, store, client)
        await built.believed.refresh()
        yield built


async def test_one_head_decides_when_the_data_object_names_the_owner(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """Data object present with the PDLI's ML and cluster: DELETE of both keys after one HEAD
    (the index is of the same upload, with the same metadata)."""
    await world.ml([2])
    keys = await world.objects(1)
    verdict = await parts.engine.verify(pdli(1, **OFF))
    evidence = verdict.offload
    assert (Decision.DELETE, keys, 1) == (
        verdict.decision,
        evidence.keys if evidence else None,
        proxy.requests["HeadObject"],
    )


async def test_a_data_object_naming_another_ml_is_mismatch_after_one_head(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """The one HEAD is the identity check: another ML's data object is MISMATCH."""
    await world.ml([2])
    await world.objects(1, ml=OTHER_ML)
    verdict = await parts.engine.verify(pdli(1, **OFF))
    assert (
        verdict.decision,
        verdict.skip_reason,
        proxy.requests["HeadObject"],
    ) == (Decision.SKIP, SkipReason.MISMATCH, 1)


@pytest.mark.parametrize(("named", "decision"), [(ML, Decision.DELETE), (OTHER_ML, Decision.SKIP)])
async def test_an_index_left_alone_is_headed_and_judged(
    world: World,
    parts: Any,
    proxy: S3FaultProxy,
    s3client: Any,
    named: str,
    decision: Decision,
) -> None:
    """Data object gone (a delete that removed only it), index still there: the index is
    HEADed and its own metadata decides (DELETE for the owner's, MISMATCH for another's)."""
    await world.ml([2])
    keys = await world.objects(1, ml=named)
    await s3client.delete_object(Bucket=BUCKET, Key=keys[0])
    verdict = await parts.engine.verify(pdli(1, **OFF))
    assert (decision, 2) == (verdict.decision, proxy.requests["HeadObject"])


async def test_both_absent_is_not_found_after_both_heads(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """NOT_FOUND (acknowledged) only once both keys answered 404 in a bucket that exists."""
    await world.ml([2])
    await world.bucket()
    verdict = await parts.engine.verify(pdli(1, **OFF))
    assert (
        verdict.decision,
        verdict.skip_reason,
        proxy.requests["HeadObject"],
    ) == (Decision.SKIP, SkipReason.NOT_FOUND, 2)


async def test_a_failed_head_is_retry_not_absent(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """HEADs failing (500, after the client's own retries): RETRY naming S3, never NOT_FOUND."""
    await world.ml([2])
    await world.bucket()
    proxy.fail(status=500, code="InternalError", operation="HeadObject")
    verdict = await parts.engine.verify(pdli(1, **OFF))
    assert (verdict.decision, verdict.code) == (Decision.RETRY, "unavailable_s3")


async def test_a_404_in_an_unconfirmed_bucket_is_retry(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """Both HEADs 404 but the bucket HEAD fails: a missing bucket or a wrong endpoint is not
    "absent", so RETRY, not NOT_FOUND."""
    await world.ml([2])
    await world.bucket()
    proxy.fail(status=503, code="ServiceUnavailable", operation="HeadBucket")
    verdict = await parts.engine.verify(pdli(1, **OFF))
    assert verdict.decision == Decision.RETRY


async def test_a_reconciler_pdli_heads_both_objects(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """The reconciler's age check needs the youngest object, the index (written last): both
    are HEADed, and young objects are RETRY."""
    await world.ml([2])
    await world.objects(1)
    verdict = await parts.engine.verify(pdli(1, source=pb.RECONCILER, **OFF))
    assert (
        verdict.decision,
        verdict.code,
        proxy.requests["HeadObject"],
    ) == (Decision.RETRY, "too_young", 2)


async def test_a_batch_heads_one_object_per_ledger(
    world: World, parts: Any, proxy: S3FaultProxy
) -> None:
    """VerifyBatch of 20 offloaded ledgers: 20 DELETEs from 20 HEADs, in flight together."""
    await world.ml([100])
    for ledger_id in range(1, 21):
        await world.objects(ledger_id)
    verdicts = await parts.engine.verify_batch([pdli(i, **OFF) for i in range(1, 21)])
    assert (
        [v.decision for v in verdicts],
        proxy.requests["HeadObject"],
    ) == ([Decision.DELETE] * 20, 20)
