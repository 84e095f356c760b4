"""Offloaded copies left by old Pulsar versions, on the real ZooKeeper and moto S3.

- Pulsar 2.1 contexts: only `uidMsb/uidLsb/complete` (`ManagedLedgerImpl.offloadLoop` of 2.1;
  driverMetadata arrived in 2.2.0), so the PDLI has no driver and no bucket.
- Objects written before Pulsar 2.10: version keys only (see `legacy_objects`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

import pytest

from services.metadata.offload import INDEX_HEADER_SIZE
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier._s3 import S3ObjectStore
from services.verifier.config import VerifierConfig
from services.verifier.model import Decision, SkipReason, Source, Target
from services.verifier.offload import OffloadInspector
from services.verifier.owners import Owner
from services.verifier.validation import parse_target
from tests.verifier.conftest import make_parts
from tests.verifier.legacy_objects import index_body, put_pre_210_objects
from tests.verifier.world import BUCKET, ML, OTHER_ML, UUID, World, pdli
from tombstone.v1 import pending_delete_pb2 as pb

DELETE, SKIP = Decision.DELETE, Decision.SKIP
OWNER_PATH = f"/managed-ledgers/{ML}"


def pulsar_21_pdli(ledger_id: int = 1, **kwargs: Any) -> pb.PendingDeleteLedgerInfo:
    """An OFFLOAD_LEDGER PDLI for a context written by Pulsar 2.1: uuid only."""
    message = pdli(ledger_id, tier=pb.OFFLOAD_LEDGER, uuid=UUID, bucket=None, **kwargs)
    message.offload_context.driver_name = ""
    return message


def with_default(config: VerifierConfig, bucket: str | None) -> VerifierConfig:
    return replace(config, offload=replace(config.offload, default_bucket=bucket))


async def test_a_21_context_uses_the_default_offloader(
    config: VerifierConfig, world: World, store: ZkMetadataStore, s3client: Any
) -> None:
    """With TOMBSTONE_OFFLOAD_DEFAULT_BUCKET set, a 2.1 context's objects (2.1 wrote only the
    version keys, proved by their index) are deleted from the default bucket."""
    await world.ml([2])
    await world.bucket()
    await put_pre_210_objects(s3client, bucket=BUCKET, uuid=UUID, ledger_id=1, index_names=ML)
    parts = make_parts(with_default(config, BUCKET), store, s3client)
    verdict = await parts.engine.verify(pulsar_21_pdli())
    assert verdict.offload is not None
    assert (
        verdict.decision,
        verdict.offload.bucket,
        verdict.offload.driver_name,
    ) == (DELETE, BUCKET, "aws-s3")


async def test_a_21_context_without_a_default_is_unsupported(
    world: World, parts: Any, s3client: Any
) -> None:
    """Without a default nothing says where the objects are: UNSUPPORTED (dead-lettered)."""
    await world.ml([2])
    verdict = await parts.engine.verify(pulsar_21_pdli())
    assert (
        verdict.decision,
        verdict.skip_reason,
        verdict.code,
    ) == (SKIP, SkipReason.UNSUPPORTED, "no_default_offload")


async def test_a_blob_driver_other_than_s3_is_unsupported(world: World, parts: Any) -> None:
    """A Google Cloud Storage copy cannot be read through S3: never NOT_FOUND."""
    await world.ml([2])
    request = pdli(1, tier=pb.OFFLOAD_LEDGER, uuid=UUID, driver="google-cloud-storage")
    verdict = await parts.engine.verify(request)
    assert (verdict.skip_reason, verdict.code) == (SkipReason.UNSUPPORTED, "unsupported_driver")


def test_the_believed_identity_is_what_the_pdli_says() -> None:
    """A marker that filled the default in and one that did not give two identities; each
    PDLI is looked up by its own (Believe and Verify parse the same bytes)."""
    empty = parse_target(pulsar_21_pdli())
    filled_pdli = pulsar_21_pdli()
    filled_pdli.offload_context.driver_name = "aws-s3"
    filled_pdli.offload_context.driver_metadata["bucket"] = BUCKET
    assert empty.believed_key != parse_target(filled_pdli).believed_key
    assert empty.believed_key == parse_target(pulsar_21_pdli()).believed_key


@pytest.mark.parametrize(
    ("index_names", "decision", "code"),
    [
        (ML, DELETE, "offload_objects"),
        (OTHER_ML, SKIP, "mismatch"),
        (None, SKIP, "no_owner_proof"),
    ],
    ids=["index-names-the-owner", "index-names-another-ml", "index-of-a-pre-2.2-ledger"],
)
async def test_pre_210_objects_are_judged_by_their_index(
    world: World,
    parts: Any,
    s3client: Any,
    index_names: str | None,
    decision: Decision,
    code: str,
) -> None:
    """Objects without owner metadata: the index object's own segment metadata decides."""
    await world.ml([2])
    await world.bucket()
    await put_pre_210_objects(
        s3client, bucket=BUCKET, uuid=UUID, ledger_id=1, index_names=index_names
    )
    verdict = await parts.engine.verify(pdli(1, tier=pb.OFFLOAD_LEDGER, uuid=UUID))
    assert (decision, code) == (verdict.decision, verdict.code)


def _target(**changes: Any) -> Target:
    base = parse_target(pdli(1, tier=pb.OFFLOAD_LEDGER, uuid=UUID, fence=3))
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    ("signed", "source", "index", "decision", "code"),
    [
        (True, Source.BROKER, False, DELETE, "offload_objects"),
        (True, Source.OBSERVED, False, DELETE, "offload_objects"),
        (False, Source.BROKER, False, SKIP, "no_owner_proof"),
        (True, Source.RECONCILER, False, SKIP, "no_owner_proof"),
        (True, Source.BROKER, True, SKIP, "mismatch"),
    ],
    ids=["signed-broker", "signed-observed", "unsigned", "signed-reconciler", "index-other-ml"],
)
async def test_pre_210_objects_with_a_signed_intent(
    config: VerifierConfig,
    world: World,
    s3client: Any,
    signed: bool,
    source: Source,
    index: bool,
    decision: Decision,
    code: str,
) -> None:
    """Without a usable index, a signed intent read from the owner (fence reached, no longer
    listed) proves ownership; an index naming another ML refuses even a signed intent."""
    await world.bucket()
    await put_pre_210_objects(
        s3client, bucket=BUCKET, uuid=UUID, ledger_id=1, index_names=OTHER_ML, index=index
    )
    inspector = OffloadInspector(S3ObjectStore(s3client), config.offload)
    owner = Owner(OWNER_PATH, True, 3, {2: None})
    verdict = await inspector.judge(
        _target(signed=signed, source=source),
        owner=owner,
        believed=False,
        min_age_ms=None,
        now_ms=0,
    )
    assert (decision, code) == (verdict.decision, verdict.code)


async def test_a_garbage_index_is_no_proof(
    config: VerifierConfig, world: World, s3client: Any
) -> None:
    """An index object that is not `OffloadIndexBlockImpl` output proves nothing: unsigned is
    MISMATCH, signed (owner unlinked it) is DELETE."""
    await world.bucket()
    await put_pre_210_objects(
        s3client, bucket=BUCKET, uuid=UUID, ledger_id=1, index_names=None, index_data=b"junk"
    )
    inspector = OffloadInspector(S3ObjectStore(s3client), config.offload)
    owner = Owner(OWNER_PATH, True, 3, {})
    verdicts = [
        await inspector.judge(
            _target(signed=signed), owner=owner, believed=False, min_age_ms=None, now_ms=0
        )
        for signed in (False, True)
    ]
    assert [(v.decision, v.code) for v in verdicts] == [
        (SKIP, "no_owner_proof"),
        (DELETE, "offload_objects"),
    ]


async def test_objects_naming_another_owner_are_mismatch_even_believed(
    config: VerifierConfig, world: World, s3client: Any
) -> None:
    """A believed (or signed) intent never overrides objects that name another ML."""
    await world.objects(1, ml=OTHER_ML)
    inspector = OffloadInspector(S3ObjectStore(s3client), config.offload)
    verdict = await inspector.judge(
        _target(signed=True),
        owner=Owner(OWNER_PATH, False),
        believed=True,
        min_age_ms=None,
        now_ms=0,
    )
    assert (verdict.decision, verdict.skip_reason) == (SKIP, SkipReason.MISMATCH)


async def test_ranged_reads_against_s3(world: World, s3client: Any) -> None:
    """`read_range` returns exactly the asked bytes (fewer at the end), None for a 404."""
    await world.bucket()
    body = index_body(1, ML)
    await s3client.put_object(Bucket=BUCKET, Key="k", Body=body)
    objects = S3ObjectStore(s3client)
    head = await objects.read_range(bucket=BUCKET, key="k", start=0, length=INDEX_HEADER_SIZE)
    tail = await objects.read_range(bucket=BUCKET, key="k", start=len(body) - 4, length=100)
    missing = await objects.read_range(bucket=BUCKET, key="absent", start=0, length=10)
    assert (body[:INDEX_HEADER_SIZE], body[-4:], None) == (head, tail, missing)
