"""Reconciler requests with explicit tiers: offloaded objects found by a scan get PDLIs with the
scan's offload context; a tier the owner still references is refused; nothing is written."""

from __future__ import annotations

import pytest

from services.core.errors import InvalidArgument
from services.marker.marking import Marker
from services.marker.owners import LedgerRef
from services.marker.servicer import to_request
from tests.marker.builders import ML_PATH, UID_LSB, UID_MSB, ledger, ml_bytes
from tests.marker.conftest import ml_request
from tests.marker.fakes import FakePublisher, FakeStore
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

ML = "public/default/persistent/orders"
OTHER_MSB, OTHER_LSB = 0x1111, 0x2222


def _context(msb: int = OTHER_MSB, lsb: int = OTHER_LSB) -> _pd.OffloadContext:
    context = _pd.OffloadContext(uuid_msb=msb, uuid_lsb=lsb, driver_name="aws-s3")
    context.driver_metadata["bucket"] = "offload-bucket"
    return context


def _offload(ledger_id: int, context: _pd.OffloadContext) -> LedgerRef:
    return LedgerRef(ledger_id, (_pd.OFFLOAD_LEDGER,), context)


async def test_objects_of_an_abandoned_upload_are_marked_with_the_scan_context(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A listed ledger's objects under another uuid: one OFFLOAD_LEDGER PDLI carrying the
    given context, no write."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete")), version=4)
    request = ml_request(source=_pd.RECONCILER, reconciler_ledgers=(_offload(1, _context()),))
    result = await marker.mark(request)
    pdli = publisher.pdlis[0]
    assert (result.marked, result.not_marked, store.writes) == (
        [(1, (_pd.OFFLOAD_LEDGER,))],
        [],
        [],
    )
    assert (pdli.ledger_type, pdli.offload_context, pdli.source) == (
        _pd.OFFLOAD_LEDGER,
        _context(),
        _pd.RECONCILER,
    )


async def test_the_listed_upload_is_still_referenced(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Objects under the uuid the list names are refused, and nothing is sent."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete")), version=4)
    same = _context(UID_MSB, UID_LSB)
    result = await marker.mark(
        ml_request(source=_pd.RECONCILER, reconciler_ledgers=(_offload(1, same),))
    )
    assert ([(n.ledger_id, n.reason) for n in result.not_marked], publisher.pdlis) == (
        [(1, _mk.STILL_REFERENCED)],
        [],
    )


async def test_bookkeeper_copy_after_a_complete_offload_is_markable(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Listed as complete and bookkeeperDeleted: the BookKeeper copy is not referenced."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload="bk_deleted")), version=2)
    result = await marker.mark(ml_request(1, source=_pd.RECONCILER))
    assert result.marked == [(1, (_pd.LEDGER,))]


async def test_bookkeeper_copy_of_an_unfinished_offload_is_referenced(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Listed with an offload that is not complete: Pulsar still reads BookKeeper."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload="started")), version=2)
    result = await marker.mark(ml_request(1, source=_pd.RECONCILER))
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(1, _mk.STILL_REFERENCED)]


async def test_objects_of_a_deleted_topic_are_marked(
    marker: Marker, publisher: FakePublisher
) -> None:
    """The owner ML is gone: the objects are unreferenced; the fence token is 0."""
    result = await marker.mark(
        ml_request(source=_pd.RECONCILER, reconciler_ledgers=(_offload(9, _context()),))
    )
    assert (result.marked, publisher.pdlis[0].fence_token) == ([(9, (_pd.OFFLOAD_LEDGER,))], 0)


def _request(**fields: object) -> _mk.MarkLedgersRequest:
    base: dict[str, object] = {
        "component": _pd.MANAGED_LEDGER,
        "managed_ledger_name": ML,
        "source": _pd.RECONCILER,
    }
    base.update(fields)
    return _mk.MarkLedgersRequest(**base)  # type: ignore[arg-type]


def _entry(ledger_id: int = 1, **fields: object) -> _mk.ReconcilerLedger:
    base: dict[str, object] = {
        "ledger_id": ledger_id,
        "tiers": [_pd.OFFLOAD_LEDGER],
        "offload_context": _context(),
    }
    base.update(fields)
    return _mk.ReconcilerLedger(**base)  # type: ignore[arg-type]


def test_reconciler_ledgers_become_refs() -> None:
    """A valid entry becomes a LedgerRef with its tiers and context; ledger_ids may be empty."""
    request = to_request(_request(reconciler_ledgers=[_entry(7)]), max_batch=10)
    assert request.reconciler_ledgers == (_offload(7, _context()),)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"source": _pd.BROKER, "reconciler_ledgers": [_entry()]}, "reconciler_ledgers"),
        ({"ledger_ids": [1], "reconciler_ledgers": [_entry(1)]}, "reconciler_ledgers[0].ledger_id"),
        ({"reconciler_ledgers": [_entry(-1)]}, "reconciler_ledgers[0].ledger_id"),
        ({"reconciler_ledgers": [_entry(tiers=[])]}, "reconciler_ledgers[0].tiers"),
        ({"reconciler_ledgers": [_entry(tiers=[9])]}, "reconciler_ledgers[0].tiers"),
        (
            {"reconciler_ledgers": [_entry(offload_context=_pd.OffloadContext(driver_name="x"))]},
            "reconciler_ledgers[0].offload_context",
        ),
        (
            {"reconciler_ledgers": [_entry(offload_context=_context(1, 2))] * 1},
            None,
        ),
        (
            {"reconciler_ledgers": [_entry(offload_context=_pd.OffloadContext(uuid_msb=3))]},
            "reconciler_ledgers[0].offload_context.driver_name",
        ),
        (
            {
                "component": _pd.MANAGED_CURSOR,
                "cursor_name": "c",
                "reconciler_ledgers": [_entry()],
            },
            "reconciler_ledgers[0].tiers",
        ),
        ({"reconciler_ledgers": [_entry(i) for i in range(11)]}, "reconciler_ledgers"),
    ],
)
def test_bad_reconciler_ledgers_name_the_field(
    fields: dict[str, object], field: str | None
) -> None:
    """Each malformed entry is INVALID_ARGUMENT naming the field (None: the entry is valid)."""
    if field is None:
        assert len(to_request(_request(**fields), max_batch=10).reconciler_ledgers) == 1
        return
    with pytest.raises(InvalidArgument) as info:
        to_request(_request(**fields), max_batch=10)
    assert field == info.value.field


SCAN_STARTED = 1_700_000_000_000
"""When the reconciler's scan started, ms (long before the marker's clock now)."""


async def test_the_scan_start_is_every_pdli_s_seen_at(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A reconciler request's `seen_at_ms` is carried by each PDLI of the call, beside the
    marker's own `marked_at_ms`, which is later."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete")), version=4)
    message = _request(ledger_ids=[5], reconciler_ledgers=[_entry(1)], seen_at_ms=SCAN_STARTED)
    await marker.mark(to_request(message, max_batch=10))
    assert [(p.ledger_id, p.seen_at_ms) for p in publisher.pdlis] == [
        (5, SCAN_STARTED),
        (1, SCAN_STARTED),
    ]
    assert all(p.marked_at_ms > SCAN_STARTED for p in publisher.pdlis)


async def test_a_request_without_seen_at_sends_none(
    marker: Marker, publisher: FakePublisher
) -> None:
    """Reconcilers that do not stamp (older ones) send PDLIs as before: `seen_at_ms` 0."""
    await marker.mark(to_request(_request(reconciler_ledgers=[_entry(9)]), max_batch=10))
    assert [p.seen_at_ms for p in publisher.pdlis] == [0]


@pytest.mark.parametrize(
    "message",
    [
        _request(reconciler_ledgers=[_entry(9)], seen_at_ms=-5),
        _request(reconciler_ledgers=[_entry(9)], seen_at_ms=2**62),
        _request(source=_pd.BROKER, ledger_ids=[1], seen_at_ms=SCAN_STARTED),
        _request(source=_pd.OPERATOR, ledger_ids=[1], seen_at_ms=SCAN_STARTED),
    ],
)
def test_a_bad_seen_at_is_invalid_argument(message: _mk.MarkLedgersRequest) -> None:
    """Negative, later than the marker's clock (the PDLIs would be invalid at the verifier),
    or on a request that is not the reconciler's: INVALID_ARGUMENT naming the field."""
    with pytest.raises(InvalidArgument) as caught:
        to_request(message, max_batch=10)
    assert caught.value.field == "seen_at_ms"
