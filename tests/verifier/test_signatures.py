"""The signature check before the decision (docs/design.md §4.7), on the real ZooKeeper."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from structlog.testing import capture_logs

from services.core.signing import IntentSigner, SignatureStatus, TrustedKeys
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.config import VerifierConfig
from services.verifier.model import Decision, SkipReason, Target
from services.verifier.signatures import Forged, SignatureGate
from services.verifier.validation import parse_target
from tests.verifier.conftest import make_parts
from tests.verifier.world import World, data_meta, pdli
from tombstone.v1 import pending_delete_pb2 as pb

MARKER_KEY = Ed25519PrivateKey.generate()
OLD_KEY = Ed25519PrivateKey.generate()
TRUSTED = TrustedKeys({"m1": MARKER_KEY.public_key(), "m0": OLD_KEY.public_key()})


def signed(
    message: pb.PendingDeleteLedgerInfo, key: Ed25519PrivateKey = MARKER_KEY, key_id: str = "m1"
) -> pb.PendingDeleteLedgerInfo:
    IntentSigner({key_id: key}, key_id).sign(message)
    return message


def unlinked() -> pb.PendingDeleteLedgerInfo:
    """Ledger 2 of ML, which ML no longer lists: DELETE when nothing else objects."""
    return pdli(2, fence=1)


def tampered() -> pb.PendingDeleteLedgerInfo:
    message = signed(unlinked())
    message.ledger_id = 3  # another unlisted ledger of the same topic
    return message


async def cluster(world: World) -> None:
    await world.ledger(2, data_meta())
    await world.ledger(3, data_meta())
    await world.ml([1])


def engine_parts(
    config: VerifierConfig, store: ZkMetadataStore, s3client: Any, *, required: bool
) -> Any:
    return make_parts(
        replace(config, trusted_keys=TRUSTED, require_signed=required), store, s3client
    )


CASES = [
    # (what, PDLI, required, expected label)
    ("valid", signed(unlinked()), True, "delete"),
    ("old key still trusted", signed(unlinked(), OLD_KEY, "m0"), True, "delete"),
    ("unsigned, required", unlinked(), True, "skip_forged"),
    (
        "unknown key, required",
        signed(unlinked(), Ed25519PrivateKey.generate(), "zz"),
        True,
        "skip_forged",
    ),
    (
        "untrusted key under a trusted id",
        signed(unlinked(), Ed25519PrivateKey.generate()),
        False,
        "skip_forged",
    ),
    ("tampered, required", tampered(), True, "skip_forged"),
    ("tampered, not required", tampered(), False, "skip_forged"),
    ("unsigned, not required", unlinked(), False, "delete"),
    (
        "unknown key, not required",
        signed(unlinked(), Ed25519PrivateKey.generate(), "zz"),
        False,
        "delete",
    ),
    ("unsigned and malformed, required", pdli(None), True, "skip_forged"),
]


@pytest.mark.parametrize(("what", "message", "required", "label"), CASES, ids=[c[0] for c in CASES])
async def test_signature_policy(
    what: str,
    message: pb.PendingDeleteLedgerInfo,
    required: bool,
    label: str,
    world: World,
    config: VerifierConfig,
    store: ZkMetadataStore,
    s3client: Any,
) -> None:
    """A bad signature is always FORGED; unsigned and unknown-key PDLIs only when required;
    Verify and VerifyBatch agree."""
    await cluster(world)
    parts = engine_parts(config, store, s3client, required=required)
    await parts.believed.refresh()
    single = await parts.engine.verify(message)
    [batched] = await parts.engine.verify_batch([message])
    assert (label, label) == (single.label, batched.label), single.reason


async def test_forged_verdicts_are_counted_and_logged(
    world: World, config: VerifierConfig, store: ZkMetadataStore, s3client: Any
) -> None:
    """Each check is counted by result; a rejection writes a `tombstone.security` line."""
    await cluster(world)
    parts = engine_parts(config, store, s3client, required=True)
    await parts.believed.refresh()
    batch = [signed(unlinked()), unlinked(), tampered()]
    with capture_logs() as logs:
        verdicts = await parts.engine.verify_batch(batch)
    assert [v.decision for v in verdicts] == [Decision.DELETE, Decision.SKIP, Decision.SKIP]
    assert [v.skip_reason for v in verdicts] == [None, SkipReason.FORGED, SkipReason.FORGED]
    assert [v.code for v in verdicts[1:]] == ["unsigned", "bad_signature"]
    rejected = [line["result"] for line in logs if line["event"] == "pdli_signature_rejected"]
    assert rejected == ["unsigned", "bad_signature"]
    counts = {
        status.value: parts.metrics.signatures.labels(status.value)._value.get()
        for status in SignatureStatus
    }
    assert counts == {"valid": 1, "unsigned": 1, "unknown_key": 0, "bad_signature": 1}


def test_a_valid_signature_marks_the_target_signed() -> None:
    """Only a valid signature of a trusted key sets `Target.signed`."""
    gate = SignatureGate(TRUSTED, require_signed=False)
    good, plain = signed(unlinked()), unlinked()
    marked = gate.apply(good, parse_target(good))
    kept = gate.apply(plain, parse_target(plain))
    assert isinstance(marked, Target)
    assert isinstance(kept, Target)
    assert (marked.signed, kept.signed) == (True, False)
    assert isinstance(gate.apply(tampered(), parse_target(tampered())), Forged)
