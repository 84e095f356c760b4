"""`--submit`: send the deletion candidates to the marker as RECONCILER requests.

Candidates are grouped by reference owner (ML, cursor, schema locator; the cursor of a
compacted ledger or delayed-delivery bucket) into `MarkLedgers` calls of at most `batch`
ledgers, each ledger id at most once per call (two abandoned uploads of one ledger go in two
calls). Calls are rate-limited (a fixed ceiling) and run a few at a
time: how many follows the marker's latency and errors (an adaptive limit between
`concurrency_min` and `concurrency`, `services.core.adaptive`). The marker
refuses what its owner still references; the verifier and deleters then apply their own
checks, so a submission proposes, it never deletes by itself.

Each call carries `seen_at_ms`: the start of the scan that found its ledgers, which the
marker stamps on every PDLI and the verifier's incarnation rule compares with the creation
of the ledger it meets (docs/oxia.md). Every candidate existed then: its creation time
(the later of the metadata's and the znode's `ctime`) is older than the age window at that
very moment, the analysis's "now", and the extract read it after the scan started. So a
ledger under the same id created after the scan start is another ledger, whatever the time
between the scan and the submission; and the ledger meant passes with the same numbers the
analysis compared, whatever the clocks.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
import structlog
from aiolimiter import AsyncLimiter

from services.core.adaptive import AdaptiveLimiter, LimitSettings, Signal
from services.core.client import open_channel, rpc_errors
from services.core.config import ClientConfig
from services.core.errors import TombstoneError
from services.metadata import uuid_to_bits
from services.metadata.offload import PROP_BUCKET, PROP_REGION, PROP_SERVICE_ENDPOINT
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import marker_pb2_grpc as _mk_grpc
from tombstone.v1 import pending_delete_pb2 as _pd

log = structlog.get_logger(__name__)
SUBMITTED_FILE = "submitted.json"
_COMPONENTS = {
    "MANAGED_LEDGER": _pd.MANAGED_LEDGER,
    "MANAGED_CURSOR": _pd.MANAGED_CURSOR,
    "SCHEMA_STORAGE": _pd.SCHEMA_STORAGE,
    "COMPACTED_LEDGER": _pd.COMPACTED_LEDGER,
    "DELAYED_INDEX_BUCKET": _pd.DELAYED_INDEX_BUCKET,
}
#: Components owned by a cursor znode: the request names the ML and the cursor (for a
#: compacted ledger `__compaction`, for a bucket the subscription's encoded cursor).
_CURSOR_OWNED = frozenset({"MANAGED_CURSOR", "COMPACTED_LEDGER", "DELAYED_INDEX_BUCKET"})


@dataclass(frozen=True)
class SubmitSettings:
    marker: ClientConfig
    rate_per_s: float = 20.0
    """MarkLedgers calls per second, at most."""
    concurrency: int = 4
    """Ceiling of the adaptive limit of calls at once."""
    concurrency_min: int = 1
    """Floor of that limit (equal to `concurrency`: a static limit)."""
    batch: int = 1000
    """Ledgers per call (the marker's limit is TOMBSTONE_MARKER_MAX_BATCH)."""
    offload_driver: str = "aws-s3"
    """Driver name written into offload PDLIs (the objects came from an S3 listing); the CLI
    takes TOMBSTONE_OFFLOAD_DEFAULT_DRIVER, shared with the marker and the verifier."""
    locations: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    """Bucket -> (endpoint, region or None) of the buckets the extract listed at their own
    location (`--s3-location`). Their PDLIs name it as the offloader's driverMetadata does
    (`serviceEndpoint`, `region`): the verifier and the deleter go where the record says, and
    without it they would look for the bucket at their configured endpoint, find none and
    dead-letter the intent."""


@dataclass(frozen=True)
class Owner:
    component: str
    ml_name: str = ""
    cursor_name: str = ""
    schema_id: str = ""


@dataclass
class SubmitReport:
    calls: int = 0
    marked: dict[str, int] = field(default_factory=lambda: {"LEDGER": 0, "OFFLOAD_LEDGER": 0})
    not_marked: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def _entry(
    candidate: dict[str, Any],
    driver: str,
    locations: Mapping[str, tuple[str, str | None]],
) -> _mk.ReconcilerLedger:
    entry = _mk.ReconcilerLedger(ledger_id=candidate["ledger_id"])
    if candidate["ledger_type"] == "LEDGER":
        entry.tiers.append(_pd.LEDGER)
        return entry
    entry.tiers.append(_pd.OFFLOAD_LEDGER)
    msb, lsb = uuid_to_bits(candidate["uuid"])
    context = entry.offload_context
    context.uuid_msb, context.uuid_lsb, context.driver_name = msb, lsb, driver
    context.driver_metadata[PROP_BUCKET] = candidate["bucket"]
    if candidate["bucket"] in locations:
        endpoint, region = locations[candidate["bucket"]]
        context.driver_metadata[PROP_SERVICE_ENDPOINT] = endpoint
        if region:
            context.driver_metadata[PROP_REGION] = region
    return entry


def _owner(candidate: dict[str, Any]) -> Owner | None:
    component = candidate["component"] or ""
    ml, cursor, schema = (candidate[k] or "" for k in ("ml_name", "cursor_name", "schema_id"))
    if component == "SCHEMA_STORAGE" and schema:
        return Owner(component, schema_id=schema)
    if component in _CURSOR_OWNED and ml and cursor:
        return Owner(component, ml, cursor)
    if component == "MANAGED_LEDGER" and ml:
        return Owner(component, ml)
    return None


def plan_requests(
    candidates: Sequence[dict[str, Any]],
    settings: SubmitSettings,
    report: SubmitReport,
    *,
    seen_at_ms: int = 0,
) -> list[_mk.MarkLedgersRequest]:
    """The calls to make: per owner, rounds in which each ledger id appears once, in batches;
    each stamped with `seen_at_ms` (the scan's start; 0: unknown)."""
    by_owner: dict[Owner, list[_mk.ReconcilerLedger]] = defaultdict(list)
    for candidate in candidates:
        owner = _owner(candidate)
        if owner is None:
            report.skipped.append({"candidate": _plain(candidate), "why": "no owner known"})
            continue
        by_owner[owner].append(_entry(candidate, settings.offload_driver, settings.locations))
    requests = []
    for owner, entries in sorted(by_owner.items(), key=lambda item: _owner_key(item[0])):
        for round_entries in _rounds(entries):
            for start in range(0, len(round_entries), settings.batch):
                batch = round_entries[start : start + settings.batch]
                requests.append(_request(owner, batch, seen_at_ms))
    return requests


def _owner_key(owner: Owner) -> tuple[str, str, str, str]:
    return (owner.component, owner.ml_name, owner.cursor_name, owner.schema_id)


def _rounds(entries: list[_mk.ReconcilerLedger]) -> list[list[_mk.ReconcilerLedger]]:
    rounds: list[list[_mk.ReconcilerLedger]] = []
    seen: list[set[int]] = []
    for entry in sorted(entries, key=lambda e: e.ledger_id):
        index = next((i for i, ids in enumerate(seen) if entry.ledger_id not in ids), len(seen))
        if index == len(seen):
            rounds.append([])
            seen.append(set())
        rounds[index].append(entry)
        seen[index].add(entry.ledger_id)
    return rounds


def _request(
    owner: Owner, entries: list[_mk.ReconcilerLedger], seen_at_ms: int
) -> _mk.MarkLedgersRequest:
    request = _mk.MarkLedgersRequest(
        component=_COMPONENTS[owner.component],
        managed_ledger_name=owner.ml_name,
        cursor_name=owner.cursor_name,
        schema_id=owner.schema_id,
        source=_pd.RECONCILER,
        seen_at_ms=seen_at_ms,
    )
    for entry in entries:
        if list(entry.tiers) == [_pd.LEDGER]:
            request.ledger_ids.append(entry.ledger_id)
        else:
            request.reconciler_ledgers.append(entry)
    return request


def _plain(candidate: dict[str, Any]) -> dict[str, Any]:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in candidate.items()}


async def submit(
    candidates: Sequence[dict[str, Any]],
    settings: SubmitSettings,
    *,
    seen_at_ms: int = 0,
    on_call_done: Callable[[int, int], None] | None = None,
) -> SubmitReport:
    """Send every candidate; failures of one call are recorded, the others go on.
    `seen_at_ms`: the start of the scan that found them (`scan_started_ms`; 0: unknown).
    `on_call_done(done, total)` follows the MarkLedgers calls (a progress bar)."""
    report = SubmitReport()
    requests = plan_requests(candidates, settings, report, seen_at_ms=seen_at_ms)
    finished = 0
    rate = AsyncLimiter(settings.rate_per_s, 1.0)
    slots = AdaptiveLimiter(
        LimitSettings(min_limit=settings.concurrency_min, max_limit=settings.concurrency),
        classify=marker_signal,
    )
    channel = open_channel(settings.marker)
    try:
        stub = _mk_grpc.MarkerStub(channel)

        async def call(request: _mk.MarkLedgersRequest) -> None:
            nonlocal finished
            await rate.acquire()
            await _call(stub, request, report, slots)
            finished += 1
            if on_call_done is not None:
                on_call_done(finished, len(requests))

        await asyncio.gather(*(call(r) for r in requests))
    finally:
        await channel.close()
    log.info("reconciler candidates submitted", calls=report.calls, marked=report.marked)
    return report


_UNANSWERED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def marker_signal(error: BaseException) -> Signal:
    """A call the marker did not answer (unavailable, deadline) or refused for load
    (RESOURCE_EXHAUSTED) cuts the limit; any other answer is a latency sample."""
    cause = error.__cause__ if isinstance(error, TombstoneError) else error
    if not isinstance(cause, grpc.aio.AioRpcError):
        return Signal.IGNORED
    if cause.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Signal.THROTTLED
    return Signal.UNANSWERED if cause.code() in _UNANSWERED else Signal.ANSWERED


async def _call(
    stub: _mk_grpc.MarkerStub,
    request: _mk.MarkLedgersRequest,
    report: SubmitReport,
    slots: AdaptiveLimiter,
) -> None:
    """One call under the limit; its failure is recorded (after the limit saw it)."""
    owner = request.managed_ledger_name or request.schema_id
    report.calls += 1
    try:
        async with slots.slot():
            with rpc_errors("marker"):
                response: _mk.MarkLedgersResponse = await stub.MarkLedgers(request)
    except TombstoneError as exc:
        ids = [*request.ledger_ids, *(r.ledger_id for r in request.reconciler_ledgers)]
        report.errors.append({"owner": owner, "ledger_ids": ids, "error": str(exc)})
        return
    for marked in response.marked:
        for tier in marked.tiers:
            report.marked[_pd.LedgerType.Name(tier)] += 1
    for not_marked in response.not_marked:
        report.not_marked.append(
            {
                "owner": owner,
                "ledger_id": not_marked.ledger_id,
                "reason": _mk.NotMarkedReason.Name(not_marked.reason),
                "message": not_marked.message,
            }
        )


def scan_started_ms(run_dir: str | Path) -> int:
    """When the scan the run analysed started (summary.json's `scan.started_ms`), or 0 when
    the run does not say: its PDLIs then carry no `seen_at_ms`, as before it was sent."""
    from services.scan.report.write import SUMMARY_FILE

    try:
        summary = json.loads((Path(run_dir) / SUMMARY_FILE).read_text())
        started = summary["scan"]["started_ms"]
    except (OSError, ValueError, KeyError, TypeError):
        return 0
    return started if isinstance(started, int) and started > 0 else 0


def read_candidates(out_dir: str | Path) -> list[dict[str, Any]]:
    """The candidates an analysis wrote (small: read on the driver, without Spark)."""
    import pyarrow.parquet as pq

    path = Path(out_dir) / "candidates"
    if not path.exists():
        return []
    return list(pq.read_table(path).to_pylist())


def write_report(
    out_dir: str | Path, report: SubmitReport, extra: dict[str, Any] | None = None
) -> Path:
    path = Path(out_dir) / SUBMITTED_FILE
    body = asdict(report) | {"ok": report.ok} | (extra or {})
    path.write_text(json.dumps(body, indent=2, sort_keys=True))
    return path


def _redraw(run_dir: Path, dry_run: bool) -> None:
    from services.scan.report.write import SUMMARY_FILE, write_html_report, write_summary

    summary_path = run_dir / SUMMARY_FILE
    if summary_path.exists():
        summary = json.loads(summary_path.read_text())
        summary["dry_run"] = dry_run
        write_summary(run_dir, summary)
        write_html_report(run_dir, summary)


def mark_submit_started(out_dir: str | Path) -> None:
    """Before the first call: summary.json and the report stop saying "dry run", so a
    submit cut short (SIGINT, crash) never leaves a record that claims nothing was sent."""
    _redraw(Path(out_dir), dry_run=False)


def record_submission(
    out_dir: str | Path, report: SubmitReport, extra: dict[str, Any] | None = None
) -> Path:
    """After a submit: submitted.json (with `extra`, e.g. what a --plan left out), then
    summary.json no longer says "dry run" (something was sent to the marker, whatever it
    answered), then report.html drawn again from both, so the run's own record shows what
    was submitted and refused."""
    run_dir = Path(out_dir)
    path = write_report(run_dir, report, extra)
    _redraw(run_dir, dry_run=report.calls == 0)
    return path
