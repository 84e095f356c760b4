"""How candidates become MarkLedgers requests: one owner per call, each ledger once per call,
offloaded copies with the scan's context; candidates without an owner are skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.core.config import ClientConfig
from services.metadata import uuid_to_bits
from services.scan.progress import render
from services.scan.submit.send import (
    SubmitReport,
    SubmitSettings,
    plan_requests,
    scan_started_ms,
)
from tombstone.v1 import pending_delete_pb2 as _pd

ML = "public/default/persistent/t"
U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"
SETTINGS = SubmitSettings(marker=ClientConfig("127.0.0.1:1"), batch=2)


def cand(ledger_id: int, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ledger_type": "LEDGER",
        "ledger_id": ledger_id,
        "component": "MANAGED_LEDGER",
        "ml_name": ML,
        "cursor_name": None,
        "schema_id": None,
        "bucket": None,
        "uuid": None,
    }
    return base | kw


def offload(ledger_id: int, uuid: str) -> dict[str, Any]:
    return cand(ledger_id, ledger_type="OFFLOAD_LEDGER", bucket="b1", uuid=uuid)


def test_ledgers_of_one_owner_go_in_batches() -> None:
    """Three data ledgers of one ML with batch 2: two calls, plain ledger ids."""
    requests = plan_requests([cand(3), cand(1), cand(2)], SETTINGS, SubmitReport())
    assert [list(r.ledger_ids) for r in requests] == [[1, 2], [3]]
    assert {r.source for r in requests} == {_pd.RECONCILER}


def test_two_uploads_of_one_ledger_go_in_two_calls() -> None:
    """Each ledger id appears once per call; offload entries carry uuid, driver and bucket."""
    requests = plan_requests([offload(5, U1), offload(5, U2)], SETTINGS, SubmitReport())
    contexts = [r.reconciler_ledgers[0].offload_context for r in requests]
    assert [(c.uuid_msb, c.uuid_lsb) for c in contexts] == [uuid_to_bits(U1), uuid_to_bits(U2)]
    assert {(c.driver_name, c.driver_metadata["bucket"]) for c in contexts} == {("aws-s3", "b1")}


def test_a_bucket_at_its_own_location_is_named_with_it() -> None:
    """A bucket the extract listed at its `--s3-location` is submitted with that endpoint and
    region in driverMetadata, as the offloader records them (`serviceEndpoint`, `region`):
    the verifier and the deleter look where the record says. Other buckets name none."""
    settings = SubmitSettings(
        marker=ClientConfig("127.0.0.1:1"),
        locations={"west": ("http://s3.west.example:9000", "us-west-2")},
    )
    candidates = [offload(5, U1), cand(6, ledger_type="OFFLOAD_LEDGER", bucket="west", uuid=U2)]
    requests = plan_requests(candidates, settings, SubmitReport())
    metadata = {
        e.ledger_id: dict(e.offload_context.driver_metadata)
        for r in requests
        for e in r.reconciler_ledgers
    }
    assert metadata == {
        5: {"bucket": "b1"},
        6: {
            "bucket": "west",
            "serviceEndpoint": "http://s3.west.example:9000",
            "region": "us-west-2",
        },
    }


def test_cursor_and_schema_owners_are_separate_calls() -> None:
    """A cursor ledger and a schema ledger each go to their own owner."""
    cursor = cand(7, component="MANAGED_CURSOR", cursor_name="sub")
    schema = cand(8, component="SCHEMA_STORAGE", ml_name=None, schema_id="public/default/t")
    requests = plan_requests([cursor, schema], SETTINGS, SubmitReport())
    owners = sorted((r.component, r.cursor_name, r.schema_id) for r in requests)
    assert owners == [(_pd.MANAGED_CURSOR, "sub", ""), (_pd.SCHEMA_STORAGE, "", "public/default/t")]


def test_candidate_without_owner_is_skipped() -> None:
    """An offloaded object naming no managed ledger cannot be marked: reported as skipped."""
    report = SubmitReport()
    requests = plan_requests([cand(9, ml_name=None)], SETTINGS, report)
    assert (requests, len(report.skipped)) == ([], 1)


def test_progress_bar_text() -> None:
    """The bar shows completed tasks out of the total."""
    assert render(5, 10, "extract").endswith("[###############---------------] 5/10 tasks")


def test_cursor_owned_ledgers_go_to_their_cursor() -> None:
    """Compacted ledgers and buckets are sent with their component, ML and cursor, one call
    per cursor; without a cursor no owner is known and the candidate is skipped."""
    report = SubmitReport()
    requests = plan_requests(
        [
            cand(7, component="COMPACTED_LEDGER", cursor_name="__compaction"),
            cand(8, component="DELAYED_INDEX_BUCKET", cursor_name="my+sub"),
            cand(9, component="DELAYED_INDEX_BUCKET", cursor_name=None),
        ],
        SETTINGS,
        report,
    )
    actual = [
        (r.component, r.managed_ledger_name, r.cursor_name, list(r.ledger_ids), r.source)
        for r in requests
    ]
    assert actual == [
        (_pd.COMPACTED_LEDGER, ML, "__compaction", [7], _pd.RECONCILER),
        (_pd.DELAYED_INDEX_BUCKET, ML, "my+sub", [8], _pd.RECONCILER),
    ]
    assert [s["candidate"]["ledger_id"] for s in report.skipped] == [9]


def test_every_call_carries_the_scan_start_as_seen_at() -> None:
    """Each call of every owner and tier is stamped with the scan's start."""
    candidates = [cand(1), cand(2), cand(3), offload(5, U1), offload(5, U2)]
    requests = plan_requests(candidates, SETTINGS, SubmitReport(), seen_at_ms=1_700_000_000_000)
    assert len(requests) > 1
    assert {r.seen_at_ms for r in requests} == {1_700_000_000_000}
    unstamped = plan_requests(candidates, SETTINGS, SubmitReport())
    assert {r.seen_at_ms for r in unstamped} == {0}


def test_the_scan_start_is_read_from_the_run_summary(tmp_path: Path) -> None:
    """The stamp is the analysed scan's `started_ms` (the analysis's "now"); a run folder
    that does not say (no summary, an older or damaged one) gives 0: no stamp, as before."""
    assert scan_started_ms(tmp_path) == 0
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"scan": {"started_ms": 1_700_000_000_123}}))
    assert scan_started_ms(tmp_path) == 1_700_000_000_123
    for damaged in ("{", json.dumps({"scan": {}}), json.dumps({"scan": {"started_ms": "x"}})):
        summary.write_text(damaged)
        assert scan_started_ms(tmp_path) == 0
