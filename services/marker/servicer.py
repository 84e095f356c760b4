"""The gRPC `Marker` service: proto in, validation, the marking flow, proto out.

Errors are raised as `TombstoneError`s; the core error interceptor maps them to statuses
(INVALID_ARGUMENT naming the field, NOT_FOUND, ABORTED for a lost compare-and-set...).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from grpc import aio

from services.core.errors import InvalidArgument, Unavailable
from services.core.validation import require, require_no_duplicates, require_nonempty
from services.marker.journal import now_ms
from services.marker.marking import Marker, MarkResult
from services.marker.metrics import MarkerMetrics
from services.marker.owners import LedgerRef, resolve_owner
from services.marker.planning import MarkRequest
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

SERVICE_NAME = _mk.DESCRIPTOR.services_by_name["Marker"].full_name
MARK_METHOD = f"/{SERVICE_NAME}/MarkLedgers"
MAX_REQUEST_ID = 128
_SOURCES = {_pd.SOURCE_UNSPECIFIED: _pd.BROKER, _pd.BROKER: _pd.BROKER}
_SOURCES |= {_pd.RECONCILER: _pd.RECONCILER, _pd.OPERATOR: _pd.OPERATOR}


def to_request(message: _mk.MarkLedgersRequest, *, max_batch: int) -> MarkRequest:
    """Validate a request; every failure is `InvalidArgument` naming the field."""
    owner = resolve_owner(
        message.component,
        topic_name=message.topic_name,
        ml_name=message.managed_ledger_name,
        cursor_name=message.cursor_name,
        schema_id=message.schema_id,
    )
    ledger_ids = _ledger_ids(message, max_batch)
    reconciler_ledgers = reconciler_refs(message, ledger_ids, max_batch)
    require(
        message.write_mode in (_mk.WRITE_MODE_UNSPECIFIED, _mk.MARKER_WRITES, _mk.CALLER_WRITES),
        "write_mode",
        f"unknown write mode {message.write_mode}",
    )
    require(message.source in _SOURCES, "source", f"unknown source {message.source}")
    expected = message.expected_version if message.HasField("expected_version") else None
    require(expected is None or expected >= 0, "expected_version", f"must be ≥ 0, got {expected}")
    require(len(message.request_id) <= MAX_REQUEST_ID, "request_id", "is too long")
    return MarkRequest(
        owner=owner,
        ledger_ids=ledger_ids,
        caller_writes=message.write_mode == _mk.CALLER_WRITES,
        expected_version=expected,
        source=_SOURCES[message.source],
        request_id=message.request_id or uuid.uuid4().hex,
        new_cursor_ledger_id=_new_cursor_ledger_id(message, ledger_ids),
        reconciler_ledgers=reconciler_ledgers,
        seen_at_ms=_seen_at(message),
    )


def _seen_at(message: _mk.MarkLedgersRequest) -> int:
    """The reconciler's stamp, checked: every PDLI of the call carries it as `seen_at_ms`,
    which the verifier refuses when it is later than `marked_at_ms` (stamped after this
    check, so not earlier than the clock read here)."""
    seen = message.seen_at_ms
    if seen == 0:
        return 0
    require(message.source == _pd.RECONCILER, "seen_at_ms", "only RECONCILER requests carry it")
    require(seen > 0, "seen_at_ms", f"must be ≥ 0, got {seen}")
    now = now_ms()
    require(seen <= now, "seen_at_ms", f"{seen} is later than the marker's clock ({now})")
    return seen


def _ledger_ids(message: _mk.MarkLedgersRequest, max_batch: int) -> tuple[int, ...]:
    ids = tuple(message.ledger_ids)
    if not message.reconciler_ledgers:
        require_nonempty(ids, "ledger_ids")
    if not ids:
        return ids
    require(len(ids) <= max_batch, "ledger_ids", f"has {len(ids)} ids, at most {max_batch} allowed")
    # Whole-batch checks first (C speed); the per-item scans only run to name the culprit.
    if min(ids) < 0:
        index = next(i for i, ledger_id in enumerate(ids) if ledger_id < 0)
        raise InvalidArgument(f"ledger_ids[{index}]", f"must be ≥ 0, got {ids[index]}")
    if len(set(ids)) != len(ids):
        require_no_duplicates(ids, "ledger_ids")
    return ids


def reconciler_refs(
    message: _mk.MarkLedgersRequest, ledger_ids: tuple[int, ...], max_batch: int
) -> tuple[LedgerRef, ...]:
    """The validated `reconciler_ledgers` of a request (RECONCILER requests only)."""
    entries = message.reconciler_ledgers
    if not entries:
        return ()
    field = "reconciler_ledgers"
    require(message.source == _pd.RECONCILER, field, "only RECONCILER requests carry them")
    total = len(entries) + len(ledger_ids)
    require(total <= max_batch, field, f"{total} ledgers in all, at most {max_batch} allowed")
    seen = set(ledger_ids)
    refs = []
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        require(entry.ledger_id >= 0, f"{where}.ledger_id", f"must be ≥ 0, got {entry.ledger_id}")
        require(entry.ledger_id not in seen, f"{where}.ledger_id", "appears twice in the request")
        seen.add(entry.ledger_id)
        refs.append(_reconciler_ref(message.component, entry, where))
    return tuple(refs)


def _reconciler_ref(component: int, entry: _mk.ReconcilerLedger, where: str) -> LedgerRef:
    tiers = tuple(entry.tiers)
    require_nonempty(tiers, f"{where}.tiers")
    require(len(set(tiers)) == len(tiers), f"{where}.tiers", "has duplicates")
    for tier in tiers:
        require(tier in (_pd.LEDGER, _pd.OFFLOAD_LEDGER), f"{where}.tiers", f"unknown tier {tier}")
    if _pd.OFFLOAD_LEDGER not in tiers:
        return LedgerRef(entry.ledger_id, tiers)
    context = entry.offload_context
    require(
        component == _pd.MANAGED_LEDGER,
        f"{where}.tiers",
        "only managed-ledger data ledgers are offloaded",
    )
    require(
        entry.HasField("offload_context") and bool(context.uuid_msb or context.uuid_lsb),
        f"{where}.offload_context",
        "an OFFLOAD_LEDGER entry needs the offload uuid",
    )
    require(bool(context.driver_name), f"{where}.offload_context.driver_name", "is required")
    return LedgerRef(entry.ledger_id, tiers, context)


def _new_cursor_ledger_id(message: _mk.MarkLedgersRequest, ledger_ids: tuple[int, ...]) -> int:
    if not message.HasField("new_cursor_ledger_id"):
        return -1
    field = "new_cursor_ledger_id"
    value = message.new_cursor_ledger_id
    if message.component != _pd.MANAGED_CURSOR:
        raise InvalidArgument(field, "only MANAGED_CURSOR requests name a new cursor ledger")
    require(value >= -1, field, f"must be a ledger id or -1, got {value}")
    require(value not in ledger_ids, field, f"{value} is one of the ledgers to delete")
    return value


def to_response(result: MarkResult) -> _mk.MarkLedgersResponse:
    return _mk.MarkLedgersResponse(
        marked=[_mk.MarkedLedger(ledger_id=i, tiers=tiers) for i, tiers in result.marked],
        not_marked=[
            _mk.NotMarkedLedger(ledger_id=n.ledger_id, reason=n.reason, message=n.message)
            for n in result.not_marked
        ],
        new_version=result.new_version,
        fence_token=result.fence_token,
        written=result.written,
        pdlis_sent=result.pdlis_sent,
        request_id=result.request_id,
        read_version=result.read_version,
    )


class MarkerServicer(_mk_grpc.MarkerServicer):
    def __init__(
        self,
        marker: Marker,
        *,
        max_batch: int,
        metrics: MarkerMetrics | None = None,
        unready: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`unready` says why nothing may be published now (None: it may)."""
        self._marker = marker
        self._max_batch = max_batch
        self._metrics = metrics
        self._unready = unready

    async def MarkLedgers(
        self, request: _mk.MarkLedgersRequest, context: aio.ServicerContext
    ) -> _mk.MarkLedgersResponse:
        try:
            mark_request = to_request(request, max_batch=self._max_batch)
        except InvalidArgument:
            if self._metrics is not None:
                self._metrics.mark_calls.labels("invalid").inc()
            raise
        reason = self._unready()
        if reason is not None:
            # Nothing was read or written: the caller keeps its ledgers and tries again later.
            if self._metrics is not None:
                self._metrics.mark_calls.labels("unavailable").inc()
            raise Unavailable(reason)
        return to_response(await self._marker.mark(mark_request))
