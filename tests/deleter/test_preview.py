"""The preview's settlements over the deleter's own decision (fakes behind the deleter's ports):
verdicts recorded once acknowledged, retries deferred on the preview subscription, nothing
deleted and nothing published."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from services.core.adaptive import LimitSettings
from services.core.errors import FailedPrecondition, StartupRefused
from services.deleter.backends.filesystem import FilesystemOffloadDeleter
from services.deleter.backends.limits import BackendLimits
from services.deleter.backends.s3 import S3OffloadDeleter
from services.deleter.handling import Backends, Handler, Tracker
from services.deleter.metrics import DeleterMetrics
from services.deleter.preview import (
    NoPublishing,
    PreviewSettler,
    PreviewTally,
    preview_backends,
    require_preview_subscription,
)
from services.systopic.consumer import IncomingMessage
from services.systopic.retry import RetryPolicy
from tests.deleter.fakes import (
    FakeBookKeeper,
    FakeOffload,
    FakeSource,
    FakeVerifier,
    delete_verdict,
    incoming,
    offload_verdict,
    pdli,
    retry,
    skip,
)
from tombstone.v1 import verifier_pb2 as _vf

POLICY = RetryPolicy(initial_delay=timedelta(milliseconds=10), max_retries=3)


class Preview:
    """A handler in preview over fakes, and what it touched."""

    def __init__(self, verifier: FakeVerifier, backends: Backends | None = None) -> None:
        self.bookkeeper = FakeBookKeeper()
        self.offload = FakeOffload()
        self.metrics = DeleterMetrics()
        self.tally = PreviewTally("tombstone-preview")
        self.settler = PreviewSettler(
            self.tally, policy=POLICY, max_redeliveries=5, metrics=self.metrics
        )
        real = backends or Backends(bookkeeper=self.bookkeeper, s3=self.offload)
        self.handler = Handler(
            verdicts=verifier,
            backends=preview_backends(real),
            retry_sink=NoPublishing("retry"),
            dead_letter_sink=NoPublishing("dead-letter"),
            policy=POLICY,
            max_hold=timedelta(seconds=1),
            metrics=self.metrics,
            preview=self.settler,
        )
        self.source = FakeSource()

    async def run(self, message: IncomingMessage) -> bool:
        settlement = await self.handler.decide(Tracker(message, received_at=0))
        return await self.handler.settle(self.source, message, settlement)

    def verdicts(self, outcome: str, detail: str) -> float:
        sample = self.metrics.registry.get_sample_value(
            "tombstone_deleter_preview_verdicts_total", {"outcome": outcome, "detail": detail}
        )
        return sample or 0


async def test_a_delete_verdict_is_a_would_delete_and_deletes_nothing() -> None:
    """DELETE: acknowledged on the preview subscription, counted by tier, one audit line with
    the evidence; the backend is never called."""
    preview = Preview(FakeVerifier(lambda p: delete_verdict(p.ledger_id)))
    message = incoming(pdli(7))
    with capture_logs() as logs:
        assert await preview.run(message)
    assert preview.bookkeeper.deleted == []
    assert preview.source.acked == [message.message_id]
    assert preview.tally.would_delete == {"bookkeeper": 1}
    assert preview.verdicts("would_delete", "bookkeeper") == 1
    [line] = [log for log in logs if log["event"] == "preview_verdict"]
    assert (line["outcome"], line["ledger_id"], line["ledger_type"], line["znode_path"]) == (
        "would_delete",
        7,
        "LEDGER",
        "/ledgers/00/0000/L0007",
    )
    assert not [log for log in logs if log["event"] == "ledger_deleted"]


async def test_an_offload_delete_verdict_names_its_objects() -> None:
    preview = Preview(FakeVerifier(lambda p: offload_verdict(p.ledger_id)))
    with capture_logs() as logs:
        await preview.run(incoming(pdli(9, offload=True)))
    assert preview.offload.deleted == []
    [line] = [log for log in logs if log["event"] == "preview_verdict"]
    assert (line["detail"], line["bucket"], len(line["keys"])) == ("s3", "offload", 2)


async def test_a_known_size_adds_to_the_bytes_it_would_delete() -> None:
    def verdict(p: object) -> _vf.VerifyResponse:
        answer = offload_verdict(9)
        answer.offload.size_bytes = 4096
        return answer

    preview = Preview(FakeVerifier(verdict))
    await preview.run(incoming(pdli(9, offload=True)))
    assert preview.tally.would_delete_bytes == {"s3": 4096}


@pytest.mark.parametrize(("reason", "name"), [(_vf.IN_USE, "in_use"), (_vf.NOT_FOUND, "not_found")])
async def test_settling_skips_are_settled(reason: _vf.SkipReason.ValueType, name: str) -> None:
    preview = Preview(FakeVerifier(lambda p: skip(reason)))
    assert await preview.run(incoming(pdli(3)))
    assert preview.tally.settled == {name: 1}
    assert len(preview.source.acked) == 1


async def test_an_unsettled_skip_would_be_dead_lettered_and_nothing_is_published() -> None:
    """FORGED: what a deleter would dead-letter, with its reason code, acknowledged here; no
    sink is used (they refuse) and no pace holds it."""
    preview = Preview(FakeVerifier(lambda p: skip(_vf.FORGED)))
    assert await preview.run(incoming(pdli(3)))
    assert preview.tally.would_dead_letter == {"forged": 1}
    assert preview.verdicts("would_dead_letter", "forged") == 1


async def test_an_undecodable_message_would_be_dead_lettered() -> None:
    preview = Preview(FakeVerifier(lambda p: delete_verdict(p.ledger_id)))
    assert await preview.run(incoming(b"\xff\x00garbage"))
    assert preview.tally.would_dead_letter == {"undecodable": 1}


async def test_a_retry_is_deferred_on_the_preview_subscription() -> None:
    """RETRY: negatively acknowledged (it comes again), counted as a retry, no verdict yet."""
    preview = Preview(FakeVerifier(lambda p: retry()))
    message = incoming(pdli(4))
    assert not await preview.run(message)
    assert preview.source.released == [message.message_id]
    assert preview.tally.retries == 1
    assert preview.tally.report().would_dead_letter == {}


async def test_redeliveries_spend_the_retry_budget() -> None:
    """The broker's redelivery count stands for the retries a deleter would publish: past the
    budget (3 here), a RETRY is what a deleter would dead-letter as retries_exhausted."""
    preview = Preview(FakeVerifier(lambda p: retry()))
    message = replace(incoming(pdli(4)), redelivery_count=2)
    assert not await preview.run(message)
    assert await preview.run(replace(message, redelivery_count=3))
    assert preview.tally.would_dead_letter == {"retries_exhausted": 1}


async def test_a_retry_copy_counts_its_retries_too() -> None:
    """A message of the retry topic (left by deleters that ran before) carries its count."""
    preview = Preview(FakeVerifier(lambda p: retry()))
    assert await preview.run(incoming(pdli(4), retryCount="3"))
    assert preview.tally.would_dead_letter == {"retries_exhausted": 1}


async def test_a_failed_acknowledgement_counts_nothing() -> None:
    """Counted once acknowledged: a message whose ack failed comes again and counts then."""

    class Refusing(FakeSource):
        async def acknowledge(self, message: IncomingMessage) -> None:
            from services.core.errors import Unavailable

            raise Unavailable("broker gone")

    preview = Preview(FakeVerifier(lambda p: delete_verdict(p.ledger_id)))
    preview.source = Refusing()
    await preview.run(incoming(pdli(7)))
    assert preview.tally.would_delete == {}


def _s3(buckets: frozenset[str]) -> S3OffloadDeleter:
    limits = BackendLimits(concurrency=LimitSettings(1, 1), per_second=1)
    return S3OffloadDeleter(object(), allowed_buckets=buckets, limits=limits)


async def test_what_the_backend_would_refuse_would_be_dead_lettered() -> None:
    """The real backend's checks run: a bucket this deleter may not touch is what a deleter
    would dead-letter as a permanent error, as it would."""
    backends = Backends(s3=_s3(frozenset({"elsewhere"})))
    preview = Preview(FakeVerifier(lambda p: offload_verdict(p.ledger_id)), backends)
    assert await preview.run(incoming(pdli(9, offload=True)))
    assert preview.tally.would_dead_letter == {"permanent_error": 1}


async def test_an_allowed_bucket_passes_the_checks() -> None:
    backends = Backends(s3=_s3(frozenset({"offload"})))
    preview = Preview(FakeVerifier(lambda p: offload_verdict(p.ledger_id)), backends)
    await preview.run(incoming(pdli(9, offload=True)))
    assert preview.tally.would_delete == {"s3": 1}


async def test_a_filesystem_copy_is_left_in_place(tmp_path: Path) -> None:
    target = (
        tmp_path / "t" / "ns" / "persistent" / "topic" / "9-0b4c3a52-5d1e-4c55-9a3b-1f2e3d4c5b6a"
    )
    target.mkdir(parents=True)
    (target / "index").write_bytes(b"x")
    evidence = _vf.OffloadEvidence(driver_name="filesystem", filesystem_path=str(target))
    verdict = _vf.VerifyResponse(decision=_vf.DELETE, offload=evidence)
    backends = Backends(filesystem=FilesystemOffloadDeleter(tmp_path))
    preview = Preview(FakeVerifier(lambda p: verdict), backends)
    await preview.run(incoming(pdli(9, offload=True)))
    assert (target / "index").exists()
    assert preview.tally.would_delete == {"filesystem": 1}


async def test_the_sinks_of_a_preview_refuse_to_publish() -> None:
    with pytest.raises(FailedPrecondition, match="publishes nothing"):
        await NoPublishing("retry").publish([])


class Lister:
    def __init__(self, subscriptions: dict[str, list[str]]) -> None:
        self._subscriptions = subscriptions

    async def subscriptions(self, topic: str) -> list[str] | None:
        return self._subscriptions.get(topic)


async def test_a_missing_preview_subscription_refuses_the_start() -> None:
    """Missing on one partition: refused, naming it and what to run."""
    lister = Lister(
        {"sys-partition-0": ["tombstone-preview"], "sys-partition-1": ["tombstone-deleter"]}
    )
    with pytest.raises(StartupRefused, match=r"sys-partition-1.*tombstone setup"):
        await require_preview_subscription(lister, ["sys"], "tombstone-preview", 2)
    lister = Lister({"sys": ["tombstone-preview"]})
    await require_preview_subscription(lister, ["sys"], "tombstone-preview", 0)


async def test_a_batch_sent_again_is_not_counted_twice() -> None:
    """The broker sends a batch again, acknowledged messages included: the second delivery of
    a counted message is acknowledged again and not counted."""
    preview = Preview(FakeVerifier(lambda p: delete_verdict(p.ledger_id)))
    message = incoming(pdli(7))
    assert await preview.run(message)
    assert await preview.run(replace(message, redelivery_count=1))
    assert preview.source.acked == [message.message_id] * 2
    assert preview.tally.would_delete == {"bookkeeper": 1}
    assert preview.verdicts("would_delete", "bookkeeper") == 1
