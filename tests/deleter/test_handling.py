"""Every branch of one message's life ends in exactly one settlement (docs/design.md §5, §11)."""

from __future__ import annotations

import time

import pytest
from structlog.testing import capture_logs

from services.deleter.handling import Handler, Tracker
from services.deleter.metrics import DeleterMetrics
from services.deleter.ports import DeleteFailed, Tier
from services.systopic.consumer import IncomingMessage
from services.systopic.dead_letter import PROP_REASON, PROP_REASON_CODE
from services.systopic.messages import decode_intent
from services.systopic.retry import PROP_RETRY_COUNT, PROP_RETRY_REASON
from tests.deleter.fakes import (
    FakeBookKeeper,
    FakeOffload,
    FakePublisher,
    FakeSource,
    FakeVerifier,
    delete_verdict,
    incoming,
    offload_verdict,
    pdli,
    retry,
    skip,
    unavailable,
)
from tombstone.v1 import verifier_pb2 as _vf


async def process(handler: Handler, message: IncomingMessage) -> FakeSource:
    source = FakeSource()
    settlement = await handler.decide(Tracker(message, received_at=time.time()))
    await handler.settle(source, message, settlement)
    return source


async def test_delete_verdict_deletes_at_the_verified_version_then_acks(
    handler: Handler, bookkeeper: FakeBookKeeper
) -> None:
    """DELETE with BookKeeper evidence deletes that znode at that version and acknowledges."""
    message = incoming(pdli(7))
    source = await process(handler, message)
    assert bookkeeper.deleted == [(7, "/ledgers/00/0000/L0007", 0)]
    assert [message.message_id] == source.acked
    assert source.released == []


async def test_every_hard_delete_writes_an_audit_line(handler: Handler) -> None:
    """The audit line names the ledger, the tier and the evidence."""
    with capture_logs() as logs:
        await process(handler, incoming(pdli(7)))
    [line] = [entry for entry in logs if entry.get("audit")]
    assert (line["event"], line["ledger_id"], line["tier"]) == ("ledger_deleted", 7, "bookkeeper")
    assert (line["znode_path"], line["znode_version"]) == ("/ledgers/00/0000/L0007", 0)


async def test_offload_verdict_goes_to_the_offload_backend(
    handler: Handler, verifier: FakeVerifier, offload: FakeOffload
) -> None:
    """An OFFLOAD_LEDGER PDLI with offload evidence deletes both keys and acknowledges."""
    verifier.answer = lambda p: offload_verdict(p.ledger_id)
    message = incoming(pdli(9, offload=True))
    source = await process(handler, message)
    assert len(offload.deleted) == 1
    assert [message.message_id] == source.acked


async def test_skip_acknowledges_without_deleting(
    handler: Handler, verifier: FakeVerifier, bookkeeper: FakeBookKeeper
) -> None:
    """A final SKIP is acknowledged and deletes nothing."""
    verifier.answer = lambda p: skip(_vf.IN_USE)
    message = incoming(pdli(7))
    source = await process(handler, message)
    assert ([], [message.message_id]) == (bookkeeper.deleted, source.acked)


@pytest.mark.parametrize("reason", [_vf.NOT_FOUND, _vf.IN_USE])
async def test_settled_skips_are_acknowledged(
    handler: Handler,
    verifier: FakeVerifier,
    dlq_sink: FakePublisher,
    reason: _vf.SkipReason.ValueType,
) -> None:
    """Proved gone (NOT_FOUND) and still referenced after the fence (IN_USE) are settled."""
    verifier.answer = lambda p: skip(reason)
    message = incoming(pdli(7))
    source = await process(handler, message)
    assert ([message.message_id], []) == (source.acked, dlq_sink.sent)


@pytest.mark.parametrize(
    ("reason", "code"),
    [
        (_vf.INVALID, "invalid"),
        (_vf.MISMATCH, "mismatch"),
        (_vf.FORGED, "forged"),
        (_vf.UNSUPPORTED, "unsupported"),
        (_vf.SKIP_REASON_UNSPECIFIED, "unknown"),
    ],
)
async def test_unsettled_skips_are_dead_lettered_with_their_reason(
    handler: Handler,
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    dlq_sink: FakePublisher,
    reason: _vf.SkipReason.ValueType,
    code: str,
) -> None:
    """A SKIP that proves nothing gone is never acknowledged and left behind (docs/design.md §2.3):
    it goes to the dead-letter topic with its reason code, and nothing is deleted."""
    verifier.answer = lambda p: skip(reason)
    message = incoming(pdli(7))
    source = await process(handler, message)
    [letter] = dlq_sink.sent
    assert letter.properties[PROP_REASON_CODE] == code
    assert ([], [message.message_id]) == (bookkeeper.deleted, source.acked)


async def test_retry_verdict_publishes_a_delayed_copy_then_acks(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """RETRY stores a copy with retryCount 1 and a later not-before, then acks the original."""
    verifier.answer = lambda p: retry("marking in progress")
    message = incoming(pdli(7))
    before_ms = int(time.time() * 1000)
    source = await process(handler, message)
    [copy] = retry_sink.sent
    assert (
        copy.properties[PROP_RETRY_COUNT],
        copy.properties[PROP_RETRY_REASON],
    ) == ("1", "verifier: marking in progress")
    assert decode_intent(copy.payload).not_before_ms > before_ms
    assert [message.message_id] == source.acked


async def test_retry_budget_exhausted_goes_to_the_dead_letter_topic(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher, dlq_sink: FakePublisher
) -> None:
    """At the maximum retry count the PDLI is dead-lettered with the last reason, not retried."""
    verifier.answer = lambda p: retry("marking in progress")
    message = incoming(pdli(7), retryCount="3")
    source = await process(handler, message)
    [letter] = dlq_sink.sent
    assert letter.properties[PROP_REASON_CODE] == "retries_exhausted"
    assert "marking in progress" in letter.properties[PROP_REASON]
    assert ([], [message.message_id]) == (retry_sink.sent, source.acked)


async def test_verifier_unavailable_is_retried(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """An unknown verdict is a retry, never a delete."""
    verifier.answer = unavailable
    source = await process(handler, incoming(pdli(7)))
    assert len(retry_sink.sent) == 1
    assert len(source.acked) == 1


async def test_undecodable_message_is_dead_lettered_at_once(
    handler: Handler, dlq_sink: FakePublisher, verifier: FakeVerifier
) -> None:
    """Garbage goes to the DLQ byte for byte, with reason `undecodable`, and is acknowledged."""
    message = incoming(b"\xff\xfe not a protobuf")
    source = await process(handler, message)
    [letter] = dlq_sink.sent
    assert (
        letter.payload,
        letter.properties[PROP_REASON_CODE],
    ) == (b"\xff\xfe not a protobuf", "undecodable")
    assert ([], [message.message_id]) == (verifier.seen, source.acked)


async def test_transient_delete_failure_is_retried(
    handler: Handler, bookkeeper: FakeBookKeeper, retry_sink: FakePublisher
) -> None:
    """A version conflict or an outage while deleting sends the PDLI to the retry topic."""
    bookkeeper.fail = DeleteFailed(Tier.BOOKKEEPER, "metadata changed since verified")
    source = await process(handler, incoming(pdli(7)))
    assert len(retry_sink.sent) == 1
    assert len(source.acked) == 1


async def test_permanent_delete_failure_is_dead_lettered(
    handler: Handler, offload: FakeOffload, verifier: FakeVerifier, dlq_sink: FakePublisher
) -> None:
    """A failure retrying cannot fix goes to the DLQ with reason `permanent_error`."""
    verifier.answer = lambda p: offload_verdict(p.ledger_id)
    offload.fail = DeleteFailed(Tier.S3, "AccessDenied", permanent=True)
    await process(handler, incoming(pdli(9, offload=True)))
    [letter] = dlq_sink.sent
    assert letter.properties[PROP_REASON_CODE] == "permanent_error"
    assert "AccessDenied" in letter.properties[PROP_REASON]


async def test_evidence_of_the_wrong_tier_deletes_nothing(
    handler: Handler, verifier: FakeVerifier, offload: FakeOffload, dlq_sink: FakePublisher
) -> None:
    """A LEDGER PDLI answered with offload evidence is dead-lettered, not deleted."""
    verifier.answer = lambda p: offload_verdict(p.ledger_id)
    await process(handler, incoming(pdli(7)))
    assert offload.deleted == []
    assert dlq_sink.sent[0].properties[PROP_REASON_CODE] == "permanent_error"


async def test_failed_retry_publish_releases_instead_of_acking(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """If the retry copy is not stored, the original is released, never acknowledged."""
    verifier.answer = lambda p: retry()
    retry_sink.fail = True
    message = incoming(pdli(7))
    source = await process(handler, message)
    assert ([], [message.message_id]) == (source.acked, source.released)


async def test_failed_dead_letter_publish_releases_instead_of_acking(
    handler: Handler, dlq_sink: FakePublisher
) -> None:
    """If the dead letter is not stored, the original is released, never acknowledged."""
    dlq_sink.fail = True
    message = incoming(b"garbage")
    source = await process(handler, message)
    assert ([], [message.message_id]) == (source.acked, source.released)


async def test_bad_retry_count_property_is_undecodable(
    handler: Handler, dlq_sink: FakePublisher
) -> None:
    """A retry count that is not a count cannot reset the budget: DLQ as undecodable."""
    await process(handler, incoming(pdli(7), retryCount="-5"))
    assert dlq_sink.sent[0].properties[PROP_REASON_CODE] == "undecodable"


async def test_no_backend_for_a_tier_dead_letters(
    handler: Handler, verifier: FakeVerifier, dlq_sink: FakePublisher
) -> None:
    """Filesystem evidence without a filesystem backend ends in the DLQ with that reason."""
    verifier.answer = lambda p: _vf.VerifyResponse(
        decision=_vf.DELETE,
        offload=_vf.OffloadEvidence(driver_name="filesystem", filesystem_path="/x/9-u"),
    )
    await process(handler, incoming(pdli(9, offload=True)))
    assert "no filesystem backend" in dlq_sink.sent[0].properties[PROP_REASON]


async def test_pdli_without_ledger_id_is_dead_lettered(
    handler: Handler, dlq_sink: FakePublisher, verifier: FakeVerifier
) -> None:
    """A PDLI that names no ledger cannot be verified, deleted or retried: DLQ, acknowledged."""
    message = incoming(b"")
    source = await process(handler, message)
    assert ("undecodable", [], [message.message_id]) == (
        dlq_sink.sent[0].properties[PROP_REASON_CODE],
        verifier.seen,
        source.acked,
    )


async def test_metrics_count_each_outcome(
    handler: Handler, verifier: FakeVerifier, metrics: DeleterMetrics
) -> None:
    """Deleted by tier, skipped by reason, retried, dead-lettered by reason, acknowledged."""
    answers = {1: delete_verdict(1), 2: skip(_vf.NOT_FOUND), 3: retry()}
    verifier.answer = lambda p: answers[p.ledger_id]
    for ledger_id in (1, 2, 3):
        await process(handler, incoming(pdli(ledger_id)))
    await process(handler, incoming(b"\xff"))
    registry = metrics.registry

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"tombstone_deleter_{name}", labels)

    assert (
        value("deleted_total", tier="bookkeeper"),
        value("skipped_total", reason="not_found"),
        value("retried_total"),
        value("dead_lettered_total", reason="undecodable"),
        value("acknowledged_total"),
    ) == (1.0, 1.0, 1.0, 1.0, 4.0)


async def test_bytes_deleted_count_the_sizes_in_the_evidence_and_never_guess(
    handler: Handler, verifier: FakeVerifier, bookkeeper: FakeBookKeeper, metrics: DeleterMetrics
) -> None:
    """A closed ledger's length and the offloaded objects' size are counted by tier after the
    delete; a copy of unknown size (an open ledger, no Content-Length) adds nothing, and so
    does a znode that was already gone."""
    sized = delete_verdict(1)
    sized.bookkeeper.length_bytes = 100
    objects = offload_verdict(3)
    objects.offload.size_bytes = 2048
    answers = {1: sized, 2: delete_verdict(2), 3: objects, 4: offload_verdict(4), 5: sized}
    verifier.answer = lambda p: answers[p.ledger_id]
    for ledger_id in (1, 2, 3, 4):
        await process(handler, incoming(pdli(ledger_id, offload=ledger_id > 2)))
    bookkeeper.removed = False
    await process(handler, incoming(pdli(5)))

    def value(tier: str) -> float | None:
        return metrics.registry.get_sample_value(
            "tombstone_deleter_bytes_deleted_total", {"tier": tier}
        )

    assert (value("bookkeeper"), value("s3")) == (100.0, 2048.0)


@pytest.mark.parametrize("field", ["ledger_type", "component"])
async def test_an_unknown_enum_number_is_settled_not_a_crash(
    handler: Handler, bookkeeper: FakeBookKeeper, dlq_sink: FakePublisher, field: str
) -> None:
    """proto3 enums are open: a PDLI with a tier or component no proto names (the verifier
    answers SKIP INVALID to it; here one answered DELETE) is settled, and the names in the
    reason and the audit line read UNKNOWN(<n>) instead of raising."""
    odd = pdli(7)
    setattr(odd, field, 99)
    message = incoming(odd)
    with capture_logs() as logs:
        source = await process(handler, message)
    assert source.acked == [message.message_id]
    if field == "ledger_type":
        [letter] = dlq_sink.sent
        assert "UNKNOWN(99) PDLI" in letter.properties[PROP_REASON]
    else:
        [line] = [entry for entry in logs if entry.get("audit")]
        assert (bookkeeper.deleted, line["component"]) == (
            [(7, "/ledgers/00/0000/L0007", 0)],
            "UNKNOWN(99)",
        )


async def test_a_pdli_of_unknown_tier_is_retried_not_released(
    handler: Handler, verifier: FakeVerifier, retry_sink: FakePublisher
) -> None:
    """The retry copy of a PDLI whose tier no proto names is built (its type property reads
    UNKNOWN(99)); a copy that could not be built would be released and redelivered forever."""
    verifier.answer = lambda p: retry()
    odd = pdli(7)
    odd.ledger_type = 99  # type: ignore[assignment]
    message = incoming(odd)
    source = await process(handler, message)
    assert (source.acked, source.released) == ([message.message_id], [])
    assert decode_intent(retry_sink.sent[0].payload).ledger_type == 99
