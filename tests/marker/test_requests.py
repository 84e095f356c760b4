"""Request validation: every bad request is INVALID_ARGUMENT naming the field."""

from __future__ import annotations

import pytest

from services.core.errors import InvalidArgument
from services.marker.servicer import to_request
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

ML = "public/default/persistent/orders"


def _request(**fields: object) -> _mk.MarkLedgersRequest:
    base: dict[str, object] = {
        "component": _pd.MANAGED_LEDGER,
        "managed_ledger_name": ML,
        "ledger_ids": [1, 2],
    }
    base.update(fields)
    return _mk.MarkLedgersRequest(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"managed_ledger_name": ""}, "managed_ledger_name"),
        ({"managed_ledger_name": "not-a-name"}, "managed_ledger_name"),
        ({"component": _pd.LEDGER_COMPONENT_UNSPECIFIED}, "component"),
        ({"ledger_ids": []}, "ledger_ids"),
        ({"ledger_ids": [1, -2]}, "ledger_ids[1]"),
        ({"ledger_ids": [3, 3]}, "ledger_ids"),
        ({"ledger_ids": list(range(11))}, "ledger_ids"),
        ({"component": _pd.MANAGED_CURSOR}, "cursor_name"),
        ({"component": _pd.SCHEMA_STORAGE, "managed_ledger_name": ""}, "schema_id"),
        ({"topic_name": "persistent://public/default/other"}, "managed_ledger_name"),
        ({"topic_name": "non-persistent://public/default/orders"}, "topic_name"),
        ({"write_mode": 7}, "write_mode"),
        ({"source": 9}, "source"),
        ({"expected_version": -1}, "expected_version"),
        ({"new_cursor_ledger_id": 5}, "new_cursor_ledger_id"),
        (
            {"component": _pd.MANAGED_CURSOR, "cursor_name": "c", "new_cursor_ledger_id": 2},
            "new_cursor_ledger_id",
        ),
        ({"request_id": "x" * 200}, "request_id"),
        ({"managed_ledger_name": "public/default/./persistent/orders"}, "managed_ledger_name"),
        ({"managed_ledger_name": "public/./default/persistent/orders"}, "managed_ledger_name"),
        ({"managed_ledger_name": "public/default/persistent/.."}, "managed_ledger_name"),
        ({"managed_ledger_name": f"{ML}/"}, "managed_ledger_name"),
        ({"managed_ledger_name": "public//default/persistent/orders"}, "managed_ledger_name"),
        ({"managed_ledger_name": "public/default/persistent/%2E%2E"}, "managed_ledger_name"),
        ({"managed_ledger_name": "public/default/persistent/a%2Fb"}, "managed_ledger_name"),
        ({"managed_ledger_name": "public/default/persistent/a%00"}, "managed_ledger_name"),
        (
            {"managed_ledger_name": "", "topic_name": "persistent://public/default/.."},
            "topic_name",
        ),
        (
            {"managed_ledger_name": "", "topic_name": "persistent://public/default/a\x00"},
            "topic_name",
        ),
        ({"component": _pd.MANAGED_CURSOR, "cursor_name": ".."}, "cursor_name"),
        ({"component": _pd.MANAGED_CURSOR, "cursor_name": "a%2F.."}, "cursor_name"),
        (
            {"component": _pd.SCHEMA_STORAGE, "managed_ledger_name": "", "schema_id": "t/./x"},
            "schema_id",
        ),
        (
            {"component": _pd.SCHEMA_STORAGE, "managed_ledger_name": "", "schema_id": "t/ns/x/"},
            "schema_id",
        ),
    ],
)
def test_bad_requests_name_the_field(fields: dict[str, object], field: str) -> None:
    """Each malformed request raises InvalidArgument whose field is the culprit."""
    with pytest.raises(InvalidArgument) as info:
        to_request(_request(**fields), max_batch=10)
    assert field == info.value.field


def test_topic_name_alone_finds_the_managed_ledger() -> None:
    """The ML name is derived from the topic when only the topic is given."""
    request = to_request(
        _request(managed_ledger_name="", topic_name="persistent://public/default/orders"),
        max_batch=10,
    )
    assert (f"/managed-ledgers/{ML}", ML) == (
        request.owner.path,
        request.owner.managed_ledger_name,
    )


def test_defaults() -> None:
    """Unspecified mode is marker-writes, unspecified source is BROKER, an id is generated."""
    request = to_request(_request(), max_batch=10)
    assert (
        request.caller_writes,
        request.source,
        len(request.request_id),
        request.expected_version,
    ) == (False, _pd.BROKER, 32, None)


def test_schema_owner_from_a_partition_topic() -> None:
    """A partition's schema is the base topic's: /schemas/tenant/ns/base."""
    request = to_request(
        _request(
            component=_pd.SCHEMA_STORAGE,
            managed_ledger_name="",
            topic_name="persistent://public/default/orders-partition-3",
        ),
        max_batch=10,
    )
    assert request.owner.path == "/schemas/public/default/orders"


async def test_invalid_requests_are_counted() -> None:
    """A refused request counts as a Mark call with outcome "invalid" and reaches no marker."""
    from services.core.metrics import Metrics
    from services.marker.metrics import MarkerMetrics
    from services.marker.servicer import MarkerServicer

    registry = Metrics()
    servicer = MarkerServicer(None, max_batch=10, metrics=MarkerMetrics(registry))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await servicer.MarkLedgers(_request(ledger_ids=[]), None)
    sample = registry.registry.get_sample_value(
        "tombstone_marker_mark_calls_total", {"outcome": "invalid"}
    )
    assert sample == 1.0


async def test_while_unready_a_valid_request_is_unavailable_and_an_invalid_one_is_invalid() -> None:
    """With publishing held, a well-formed request gets UNAVAILABLE with the reason and
    reaches no marker; a malformed one is still INVALID_ARGUMENT (validation comes first)."""
    from services.core.errors import Unavailable
    from services.core.metrics import Metrics
    from services.marker.metrics import MarkerMetrics
    from services.marker.servicer import MarkerServicer

    registry = Metrics()
    reason = "the deleters' subscription tombstone-deleter is missing; run `tombstone setup`"
    servicer = MarkerServicer(
        None,  # type: ignore[arg-type]
        max_batch=10,
        metrics=MarkerMetrics(registry),
        unready=lambda: reason,
    )
    with pytest.raises(InvalidArgument):
        await servicer.MarkLedgers(_request(ledger_ids=[]), None)
    with pytest.raises(Unavailable, match="run `tombstone setup`"):
        await servicer.MarkLedgers(_request(ledger_ids=[1, 2]), None)
    sample = registry.registry.get_sample_value(
        "tombstone_marker_mark_calls_total", {"outcome": "unavailable"}
    )
    assert sample == 1.0
