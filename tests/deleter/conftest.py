from __future__ import annotations

from datetime import timedelta

import pytest

from services.deleter.handling import Backends, Handler
from services.deleter.metrics import DeleterMetrics
from services.systopic.retry import RetryPolicy
from tests.deleter.fakes import (
    FakeBookKeeper,
    FakeOffload,
    FakePublisher,
    FakeVerifier,
    delete_verdict,
)


@pytest.fixture
def verifier() -> FakeVerifier:
    return FakeVerifier(lambda p: delete_verdict(p.ledger_id))


@pytest.fixture
def bookkeeper() -> FakeBookKeeper:
    return FakeBookKeeper()


@pytest.fixture
def offload() -> FakeOffload:
    return FakeOffload()


@pytest.fixture
def retry_sink() -> FakePublisher:
    return FakePublisher("retry")


@pytest.fixture
def dlq_sink() -> FakePublisher:
    return FakePublisher("dlq")


@pytest.fixture
def metrics() -> DeleterMetrics:
    return DeleterMetrics()


@pytest.fixture
def handler(
    verifier: FakeVerifier,
    bookkeeper: FakeBookKeeper,
    offload: FakeOffload,
    retry_sink: FakePublisher,
    dlq_sink: FakePublisher,
    metrics: DeleterMetrics,
) -> Handler:
    return Handler(
        verdicts=verifier,
        backends=Backends(bookkeeper=bookkeeper, s3=offload),
        retry_sink=retry_sink,
        dead_letter_sink=dlq_sink,
        policy=RetryPolicy(initial_delay=timedelta(milliseconds=10), max_retries=3),
        max_hold=timedelta(seconds=2),
        metrics=metrics,
    )
