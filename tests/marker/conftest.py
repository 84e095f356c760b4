"""Shared pieces of the marker tests: a Marker over the fakes."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker, MarkingSettings
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from tests.marker.builders import CURSOR, ML_NAME, SCHEMA_ID, TOPIC
from tests.marker.fakes import FakePublisher, FakeStore
from tombstone.v1 import pending_delete_pb2 as _pd

SETTINGS = MarkingSettings(marker_id="marker-test", cluster="test-cluster")


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def publisher() -> FakePublisher:
    return FakePublisher()


@pytest.fixture
def journal() -> ReceiptJournal:
    return ReceiptJournal(retry_window=timedelta(seconds=60))


@pytest.fixture
def marker(store: FakeStore, publisher: FakePublisher, journal: ReceiptJournal) -> Marker:
    return Marker(store=store, publisher=publisher, journal=journal, settings=SETTINGS)


def ml_request(*ledger_ids: int, **kwargs: object) -> MarkRequest:
    owner = resolve_owner(
        _pd.MANAGED_LEDGER, topic_name=TOPIC, ml_name=ML_NAME, cursor_name="", schema_id=""
    )
    return MarkRequest(owner=owner, ledger_ids=ledger_ids, request_id="req-1", **kwargs)  # type: ignore[arg-type]


def cursor_request(*ledger_ids: int, **kwargs: object) -> MarkRequest:
    owner = resolve_owner(
        _pd.MANAGED_CURSOR, topic_name="", ml_name=ML_NAME, cursor_name=CURSOR, schema_id=""
    )
    return MarkRequest(owner=owner, ledger_ids=ledger_ids, request_id="req-c", **kwargs)  # type: ignore[arg-type]


def schema_request(*ledger_ids: int, **kwargs: object) -> MarkRequest:
    owner = resolve_owner(
        _pd.SCHEMA_STORAGE, topic_name="", ml_name="", cursor_name="", schema_id=SCHEMA_ID
    )
    return MarkRequest(owner=owner, ledger_ids=ledger_ids, request_id="req-s", **kwargs)  # type: ignore[arg-type]
