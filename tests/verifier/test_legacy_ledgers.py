"""Ledgers without Pulsar custom metadata (created before Pulsar 2.2, whose
`ManagedLedgerImpl` passed none to `asyncCreateLedger`): deletable only with the proof of
`ownership.proves_unlink` — a signed intent read from the owner, fence reached, owner no
longer listing it. The signature check itself is tested in test_signatures.py; here every
PDLI is taken as validly signed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from services.metadata.ledger_metadata import LedgerState
from services.metadata.pulsar_formats import SHADOW_SOURCE
from services.verifier._s3 import S3ObjectStore
from services.verifier.decision import DecisionEngine
from services.verifier.model import Decision, SkipReason, Target
from services.verifier.offload import OffloadInspector
from services.verifier.signatures import SignatureGate
from services.verifier.store_adapter import MetadataZnodeStore
from tests.verifier.world import CURSOR, OTHER_ML, World, cursor_meta, pdli
from tombstone.v1 import pending_delete_pb2 as pb

OTHER_TOPIC = "persistent://public/default/payments"


class TrustEverySignature(SignatureGate):
    """A signature gate that finds every PDLI validly signed."""

    def __init__(self) -> None:
        pass

    def apply(
        self, pdli: pb.PendingDeleteLedgerInfo, parsed: Target | Exception
    ) -> Target | Exception:
        return replace(parsed, signed=True) if isinstance(parsed, Target) else parsed


@pytest.fixture
def engine(parts: Any, config: Any, store: Any, s3client: Any) -> DecisionEngine:
    """The verifier's engine, with every PDLI taken as validly signed."""
    return DecisionEngine(
        store=MetadataZnodeStore(store),
        owners=parts.owners,
        believed=parts.believed,
        offload=OffloadInspector(S3ObjectStore(s3client), config.offload),
        signatures=TrustEverySignature(),
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


async def test_signed_unsubscribe_deletes_the_open_cursor_ledger(
    world: World, engine: DecisionEngine
) -> None:
    """Unsubscribe (ManagedLedgerImpl.asyncDeleteCursor removes the cursor znode, then
    ManagedCursorImpl.asyncDeleteCursorLedger deletes the ledger without closing it): a signed
    intent read from the cursor proves the OPEN ledger unlinked. DELETE."""
    await world.ledger(5, cursor_meta(), state=LedgerState.OPEN)
    await world.ml([1])
    verdict = await engine.verify(pdli(5, fence=1, component=pb.MANAGED_CURSOR, cursor=CURSOR))
    assert verdict.decision == Decision.DELETE


async def test_signed_intent_closes_an_open_ledger_newer_than_the_list(
    world: World, engine: DecisionEngine
) -> None:
    """A signed BROKER intent whose fence the ML reached, for an OPEN ledger no longer
    listed: unlinked by its owner, not in creation. DELETE."""
    await world.ledger(3, state=LedgerState.OPEN)
    await world.ml([2], version=4)
    verdict = await engine.verify(pdli(3, fence=4))
    assert verdict.decision == Decision.DELETE


async def test_a_shadow_topic_named_as_owner_is_mismatch(
    world: World, engine: DecisionEngine
) -> None:
    """A shadow topic's ML (PIP-180, `ShadowManagedLedgerImpl`: `PULSAR.SHADOW_SOURCE` and a
    copy of the source's list) owns no ledgers: its no longer listing a ledger proves nothing,
    and for a ledger with no custom metadata it would otherwise be the proof of ownership
    while the source still lists it. MISMATCH `owner_is_shadow`, whatever it lists."""
    await world.ledger(1, {})
    await world.ml([1], ml=OTHER_ML, version=2)  # the source, still listing it
    await world.ml([2], properties={SHADOW_SOURCE: OTHER_TOPIC}, version=3)
    verdict = await engine.verify(pdli(1, fence=3))
    assert (verdict.skip_reason, verdict.code) == (SkipReason.MISMATCH, "owner_is_shadow")
