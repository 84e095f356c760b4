"""Ledgers without Pulsar custom metadata (created before Pulsar 2.2, whose
`ManagedLedgerImpl` passed none to `asyncCreateLedger`): deletable only with the proof of
`ownership.proves_unlink` — a signed intent read from the owner, fence reached, owner no
longer listing it. The signature check itself is another part; here it is stood in for by
the engine's `authenticate` hook."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from services.verifier._s3 import S3ObjectStore
from services.verifier.decision import DecisionEngine
from services.verifier.model import Decision, SkipReason, Target
from services.verifier.offload import OffloadInspector
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import World, pdli
from tombstone.v1 import pending_delete_pb2 as pb


def signed(_pdli: pb.PendingDeleteLedgerInfo, target: Target) -> Target:
    return replace(target, signed=True)


@pytest.fixture
def engine(parts: Any, config: Any, store: Any, s3client: Any) -> DecisionEngine:
    """The verifier's engine, with every PDLI taken as validly signed."""
    return DecisionEngine(
        store=MetadataZnodeStore(store),
        owners=parts.owners,
        believed=parts.believed,
        offload=OffloadInspector(S3ObjectStore(s3client), config.offload),
        authenticate=signed,
    )


async def test_signed_intent_whose_owner_unlinked_it_is_delete(
    world: World, engine: DecisionEngine
) -> None:
    """Signed BROKER PDLI, the ML at the fence token and no longer listing it: DELETE."""
    await world.ledger(1, {})
    await world.ml([2], version=3)
    verdict = await engine.verify(pdli(1, fence=3))
    assert verdict.decision == Decision.DELETE


@pytest.mark.parametrize(
    ("version", "request_"),
    [
        (2, pdli(1, fence=3)),
        (3, pdli(1)),
        (3, pdli(1, fence=3, source=pb.RECONCILER)),
        (3, pdli(1, fence=3, source=pb.OPERATOR)),
    ],
    ids=["fence-not-reached", "no-fence-token", "reconciler", "operator"],
)
async def test_without_the_whole_proof_it_is_mismatch(
    world: World, engine: DecisionEngine, version: int, request_: pb.PendingDeleteLedgerInfo
) -> None:
    """Signed, but the fence is not reached, there is no fence token, or the intent was not
    read from the owner (reconciler, operator: the ledger may be DistributedLog's):
    MISMATCH `no_owner_proof`, dead-lettered."""
    await world.ledger(1, {})
    await world.ml([2], version=version)
    verdict = await engine.verify(request_)
    assert (verdict.skip_reason, verdict.code) == (SkipReason.MISMATCH, "no_owner_proof")


async def test_unsigned_intent_is_mismatch(world: World, parts: Any) -> None:
    """The same unlinked ledger with an unsigned PDLI: no proof, MISMATCH."""
    await world.ledger(1, {})
    await world.ml([2], version=3)
    verdict = await parts.engine.verify(pdli(1, fence=3))
    assert (verdict.skip_reason, verdict.code) == (SkipReason.MISMATCH, "no_owner_proof")
