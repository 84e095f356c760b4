"""The proof of ownership for artifacts without owner metadata (docs/design.md §4.4)."""

from __future__ import annotations

import dataclasses

import pytest

from services.verifier.model import Component, OffloadTarget, Source, Target, Tier
from services.verifier.owners import OffloadRef, Owner
from services.verifier.ownership import proves_unlink

ML = "/managed-ledgers/t/ns/persistent/x"
UUID = "00000000-0000-0001-0000-000000000002"


def target(**changes: object) -> Target:
    base = Target(
        ledger_id=7,
        tier=Tier.BOOKKEEPER,
        component=Component.MANAGED_LEDGER,
        owner_path=ML,
        ml_name="t/ns/persistent/x",
        ml_path=ML,
        fence_token=5,
        source=Source.BROKER,
        signed=True,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def owner(version: int = 5, refs: dict[int, OffloadRef | None] | None = None) -> Owner:
    return Owner(ML, True, version, refs or {})


def test_signed_broker_intent_whose_owner_unlinked_the_ledger_is_proof() -> None:
    assert proves_unlink(target(), owner())
    assert proves_unlink(target(source=Source.OBSERVED), owner())


def test_a_deleted_owner_unlinked_everything() -> None:
    assert proves_unlink(target(), Owner(ML, False))


@pytest.mark.parametrize(
    "changes",
    [
        {"signed": False},
        {"source": Source.RECONCILER},
        {"source": Source.OPERATOR},
        {"source": Source.UNSPECIFIED},
        {"fence_token": None},
    ],
)
def test_no_proof_without_a_signed_intent_read_from_the_owner(changes: dict[str, object]) -> None:
    assert not proves_unlink(target(**changes), owner())


def test_no_proof_before_the_fence_or_while_listed() -> None:
    assert not proves_unlink(target(), owner(version=4))
    assert not proves_unlink(target(), owner(refs={7: None}))


def test_bookkeeper_copy_of_an_offloaded_ledger_is_unlinked_once_bookkeeper_deleted() -> None:
    assert proves_unlink(target(), owner(refs={7: OffloadRef(UUID, True, True)}))
    assert not proves_unlink(target(), owner(refs={7: OffloadRef(UUID, True, False)}))


def test_offloaded_copy_is_unlinked_when_listed_with_another_upload() -> None:
    offload = target(tier=Tier.OFFLOAD, offload=OffloadTarget(UUID, "aws-s3", {}))
    other = "00000000-0000-0009-0000-000000000009"
    assert proves_unlink(offload, owner(refs={7: OffloadRef(other, True, False)}))
    assert not proves_unlink(offload, owner(refs={7: OffloadRef(UUID, True, False)}))
