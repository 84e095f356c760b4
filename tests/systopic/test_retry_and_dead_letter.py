"""Retry policy, retry copies and dead letters (consumer side of the system topic)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.errors import CorruptData
from services.core.signing import IntentSigner, SignatureStatus, TrustedKeys
from services.systopic.consumer import IncomingMessage
from services.systopic.dead_letter import (
    CLIENT_ORIGIN_PROPERTY,
    ReasonCode,
    dead_letter_message,
    read_dead_letter,
    replay_message,
)
from services.systopic.messages import decode_intent, encode_intent
from services.systopic.retry import PROP_RETRY_COUNT, RetryPolicy, retry_count, retry_message
from tombstone.v1 import pending_delete_pb2 as _pd

PDLI = _pd.PendingDeleteLedgerInfo(
    ledger_id=42, ledger_type=_pd.LEDGER, component=_pd.MANAGED_LEDGER, fence_token=5
)


def message(payload: bytes, properties: dict[str, str]) -> IncomingMessage:
    return IncomingMessage(payload, properties, "3:4:0:-1", "persistent://p/s/t-partition-0")


def test_backoff_grows_exponentially_and_is_capped() -> None:
    """Without jitter the delays are 1, 2, 4, 8 s, then the 10 s cap."""
    policy = RetryPolicy(max_delay=timedelta(seconds=10), jitter=0.0)
    delays = [policy.delay(n).total_seconds() for n in range(1, 7)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_jitter_stays_within_its_bounds() -> None:
    """With 20 % jitter every delay of attempt 3 lies in [3.2, 4.8] s."""
    policy = RetryPolicy(jitter=0.2)
    rng = random.Random(1)
    delays = [policy.delay(3, rng).total_seconds() for _ in range(200)]
    assert (min(delays) >= 3.2, max(delays) <= 4.8) == (True, True)


def test_retry_count_rejects_garbage() -> None:
    """A count that is not a non-negative integer is corrupt data (never a fresh budget)."""
    assert retry_count({}) == 0
    assert retry_count({PROP_RETRY_COUNT: "4"}) == 4
    with pytest.raises(CorruptData):
        retry_count({PROP_RETRY_COUNT: "x"})


def test_retry_copy_keeps_the_pdli_and_moves_not_before() -> None:
    """The copy is the same PDLI with a later not-before and the attempt number."""
    copy = retry_message(
        PDLI, attempt=2, reason="r", not_before_ms=1000, origin_message_id="1:1:-1:-1"
    )
    decoded = decode_intent(copy.payload)
    assert (decoded.ledger_id, decoded.fence_token, decoded.not_before_ms) == (42, 5, 1000)
    assert (copy.properties[PROP_RETRY_COUNT], copy.partition_key) == ("2", "42")


def test_dead_letter_reads_back_with_its_reason() -> None:
    """A dead letter keeps payload and PDLI and carries reason code, detail and count."""
    original = encode_intent(PDLI)
    letter = dead_letter_message(
        message(original.payload, dict(original.properties)),
        reason_code=ReasonCode.RETRIES_EXHAUSTED,
        reason="marking in progress",
        attempts=10,
        now_ms=99,
    )
    entry = read_dead_letter(message(letter.payload, dict(letter.properties)))
    assert (
        entry.reason_code,
        entry.reason,
        entry.retry_count,
        entry.dead_lettered_at_ms,
    ) == ("retries_exhausted", "marking in progress", 10, 99)
    assert entry.pdli is not None
    assert entry.pdli.ledger_id == 42


def test_client_backstop_letters_are_listed_as_redelivery_exhausted() -> None:
    """Messages moved by the client's dead-letter policy carry no reason of ours."""
    original = encode_intent(PDLI)
    props = {**original.properties, CLIENT_ORIGIN_PROPERTY: "(1,2,-1,-1)"}
    assert read_dead_letter(message(original.payload, props)).reason_code == "redelivery_exhausted"


def test_replay_is_due_now_with_a_fresh_budget() -> None:
    """A replayed PDLI has no retry count and is due at the replay time."""
    letter = dead_letter_message(
        message(encode_intent(PDLI).payload, {PROP_RETRY_COUNT: "10"}),
        reason_code=ReasonCode.PERMANENT_ERROR,
        reason="AccessDenied",
        attempts=10,
    )
    replay = replay_message(
        read_dead_letter(message(letter.payload, dict(letter.properties))), now_ms=7
    )
    assert (
        replay.properties.get(PROP_RETRY_COUNT),
        decode_intent(replay.payload).not_before_ms,
    ) == (None, 7)


def test_undecodable_dead_letter_cannot_be_replayed() -> None:
    """Garbage stays listable but replaying it is refused."""
    entry = read_dead_letter(message(b"\xff\xff", {}))
    assert None is entry.pdli
    with pytest.raises(CorruptData):
        replay_message(entry)


def test_retry_dead_letter_and_replay_keep_the_signature_valid() -> None:
    """The retry copy, the dead letter and its replay rewrite only not_before_ms and
    properties: the marker's signature still verifies at every step."""
    key = Ed25519PrivateKey.generate()
    trusted = TrustedKeys({"k": key.public_key()})
    original = encode_intent(PDLI, IntentSigner({"k": key}, "k"))
    retried = retry_message(
        decode_intent(original.payload),
        attempt=1,
        reason="marking in progress",
        not_before_ms=10**13,
        origin_message_id="1:1:-1:-1",
    )
    letter = dead_letter_message(
        message(retried.payload, dict(retried.properties)),
        reason_code=ReasonCode.RETRIES_EXHAUSTED,
        reason="marking in progress",
        attempts=10,
    )
    entry = read_dead_letter(message(letter.payload, dict(letter.properties)))
    replayed = replay_message(entry, now_ms=7)
    steps = [original, retried, letter, replayed]
    decoded = [decode_intent(step.payload) for step in steps]
    assert [decoded[1].not_before_ms, decoded[3].not_before_ms] == [10**13, 7]
    assert [trusted.check(pdli) for pdli in decoded] == [SignatureStatus.VALID] * 4
