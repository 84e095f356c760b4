"""The run refuses to propose deletions when the scan is incomplete or implausible."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import collect_rows
from services.scan.analysis.safety import (
    SafetyVerdict,
    cluster_problems,
    decode_problems,
    gate_candidates,
    manifest_problems,
    share_problems,
)
from services.scan.schema import SCAN_MANIFEST, extract_from_rows
from tests.scan import planted as P


def _manifest(spark: SparkSession, rows: list[P.Row]) -> list[dict[str, Any]]:
    """The manifest's rows as the job hands them to the checks: through the extract."""
    return collect_rows(extract_from_rows(spark, {"scan_manifest": rows}).scan_manifest)


def _cluster_problems(spark: SparkSession, rows: dict[str, list[P.Row]]) -> list[str]:
    extract = extract_from_rows(spark, rows)
    return cluster_problems(extract, P.CLUSTER, collect_rows(extract.scan_run))


def test_complete_manifest_has_no_problem(spark: SparkSession) -> None:
    """Every kind ran and succeeded: nothing to refuse."""
    assert manifest_problems(_manifest(spark, [P.task(k) for k in P.KINDS])) == []


def test_failed_task_is_a_refusal_reason(spark: SparkSession) -> None:
    """A failed listing is named with its kind, scope and error."""
    rows = [P.task(k) for k in P.KINDS]
    rows.append(P.task("managed_ledgers", "failed", "ConnectionLoss") | {"task_id": "ml-7"})
    expected = ["extract task ml-7 (managed_ledgers /) failed: ConnectionLoss"]
    assert expected == manifest_problems(_manifest(spark, rows))


def test_truncated_task_is_a_refusal_reason(spark: SparkSession) -> None:
    """A truncated bucket listing is as bad as a failed one."""
    rows = [P.task(k) for k in P.KINDS[:-1]]
    rows.append(P.task("offload_objects", "truncated", "listing cut at 1000 pages"))
    expected = [
        "extract task offload_objects-0 (offload_objects /) truncated: listing cut at 1000 pages",
        "no successful extract task of kind 'offload_objects': its absence would read as "
        "'not referenced'",
    ]
    assert expected == manifest_problems(_manifest(spark, rows))


def test_missing_kind_is_a_refusal_reason(spark: SparkSession) -> None:
    """A kind of task that never ran means its references are unknown."""
    rows = [P.task(k) for k in P.KINDS if k != "schemas"]
    expected = [
        "no successful extract task of kind 'schemas': its absence would read as 'not referenced'"
    ]
    assert expected == manifest_problems(_manifest(spark, rows))


def test_undecodable_reference_znode_is_a_refusal_reason(spark: SparkSession) -> None:
    """An ML znode that could not be decoded may reference any ledger."""
    rows = {"managed_ledgers": [P.ml(P.LIVE, decode_error="bad magic")]}
    assert decode_problems(extract_from_rows(spark, rows)) == [
        "1 managed_ledgers znodes could not be decoded"
    ]


def _counts(spark: SparkSession, rows: list[tuple[str, str, str | None, int]]):
    return spark.createDataFrame(
        [(kind, reason, count, 0, source) for source, kind, reason, count in rows],
        "kind string, orphan_reason string, count long, bytes long, source string",
    )


def test_orphan_share_above_limit_is_a_refusal_reason(spark: SparkSession) -> None:
    """3 orphans of 10 Pulsar-owned ledgers (unknown ownership not counted) is 30% > 20%."""
    counts = _counts(
        spark,
        [
            ("ledger", "referenced", None, 7),
            ("ledger", "topic_gone", "topic_gone", 2),
            ("ledger", "too_young", "not_in_list", 1),
            ("ledger", "unknown_ownership", None, 50),
            ("object", "referenced", None, 4),
        ],
    )
    reasons, ledger_share, object_share = share_problems(counts, 0.2)
    assert (ledger_share, object_share) == (0.3, 0.0)
    assert reasons == [
        "30.0% of Pulsar-owned ledgers look orphaned, above the 20.0% limit: a scan problem "
        "is likelier than that many orphans"
    ]


def test_orphan_share_at_limit_is_accepted(spark: SparkSession) -> None:
    """Exactly the limit is not above it."""
    counts = _counts(
        spark,
        [("ledger", "referenced", None, 8), ("ledger", "not_in_list", "not_in_list", 2)],
    )
    assert share_problems(counts, 0.2)[0] == []


def test_objects_of_another_cluster_are_not_a_refusal_reason(spark: SparkSession) -> None:
    """In a shared bucket another cluster's objects are excluded, not a reason to refuse: also
    one whose ledger id is one of ours (ids are per cluster) under another uuid."""
    rows = P.planted_rows()
    rows["offload_objects"] += [
        P.obj(f"{P.U9}-ledger-31", uuid=P.U9, ledger_id=31, cluster_name="east"),
        P.obj(f"{P.U8}-ledger-5", uuid=P.U8, ledger_id=5, cluster_name="west"),
    ]
    assert _cluster_problems(spark, rows) == []


def test_our_listed_objects_naming_another_cluster_are_a_refusal_reason(
    spark: SparkSession,
) -> None:
    """Objects whose ledger id *and* uuid one of our topics lists are ours: naming another
    cluster, they say --cluster is wrong (else all our objects would be excluded)."""
    rows = P.planted_rows()
    rows["offload_objects"] = [
        o | {"cluster_name": "east"} if o["uuid"] == P.U2 else o for o in rows["offload_objects"]
    ]
    expected = [
        "offloaded objects that this cluster's topics list (same ledger id and uuid) name "
        "another cluster than 'c1': 'east' (2 objects); --cluster is likely not the name the "
        "brokers write (pulsarclustername)"
    ]
    assert expected == _cluster_problems(spark, rows)


def test_other_cluster_objects_are_not_in_the_orphan_share(spark: SparkSession) -> None:
    """1 orphan of 4 objects of this cluster is 25%, however many other clusters' objects."""
    counts = _counts(
        spark,
        [
            ("object", "referenced", None, 3),
            ("object", "offload_no_match", "offload_no_match", 1),
            ("object", "other_cluster", None, 96),
        ],
    )
    assert share_problems(counts, 0.2)[2] == 0.25


def test_scan_of_another_cluster_is_a_refusal_reason(spark: SparkSession) -> None:
    """An extract taken of another cluster is never used to delete in this one."""
    rows = {"scan_run": [{"scan_id": "s", "cluster_name": "c2", "started_ms": P.NOW}]}
    expected = ["the extract was taken of cluster(s) ['c2'], not 'c1'"]
    assert expected == _cluster_problems(spark, rows)


def test_refused_verdict_withholds_every_candidate(spark: SparkSession) -> None:
    """Gating a refused verdict leaves zero candidates, keeping the schema."""
    frame = spark.createDataFrame([P.task("bk_ledgers")], SCAN_MANIFEST)
    refused = SafetyVerdict(("a reason",), 0.0, 0.0)
    allowed = SafetyVerdict((), 0.0, 0.0)
    assert (
        gate_candidates(frame, refused).count(),
        gate_candidates(frame, allowed).count(),
    ) == (0, 1)
    assert frame.schema == gate_candidates(frame, refused).schema


@pytest.mark.parametrize("share", [-0.1, 1.5])
def test_share_limit_out_of_range_is_rejected(share: float) -> None:
    """The limit is a share between 0 and 1."""
    with pytest.raises(ValueError, match="max_orphan_share"):
        AnalyzeConfig(cluster="c1", max_orphan_share=share)
