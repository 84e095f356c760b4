"""Dormant topics, inactive cursors and reclaimable bytes on the planted extract."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from services.scan.analysis import insights
from services.scan.analysis.candidates import deletion_candidates
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import Analysis, analyze
from services.scan.schema import extract_from_rows
from tests.scan import planted as P


@pytest.fixture(scope="module")
def analysis(spark: SparkSession) -> Analysis:
    rows = P.planted_rows()
    rows["managed_ledgers"].append(P.ml("t3/ns3/persistent/idle", mtime=P.OLD))
    rows["ml_ledgers"].append(P.listed("t3/ns3/persistent/idle", 10, 0))
    rows["cursors"].append(P.cursor(P.LIVE, "old-sub", -1, last_active_ms=P.NOW - 40 * P.DAY))
    extract = extract_from_rows(spark, rows)
    return analyze(extract, AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW)


def test_dormant_topics_are_the_old_unloaded_ones(analysis: Analysis) -> None:
    """Old znode and closed last ledger → dormant; a loaded (OPEN last) or recent ML is not."""
    rows = analysis.dormant_topics.select("ml_name", "ledgers").collect()
    assert sorted(tuple(r) for r in rows) == [(P.OFFL, 3), ("t3/ns3/persistent/idle", 1)]


def test_inactive_cursors_are_listed(analysis: Analysis) -> None:
    """Only the cursor idle for 40 days passes the 30-day threshold."""
    rows = analysis.inactive_cursors.select("ml_name", "cursor_name", "idle_ms").collect()
    assert [tuple(r) for r in rows] == [(P.LIVE, "old-sub", 40 * P.DAY)]


def test_reclaimable_bytes_per_namespace(analysis: Analysis) -> None:
    """Candidates are summed per owning namespace; an upload counts once with its bytes."""
    candidates = deletion_candidates(analysis.ledger_findings, analysis.object_findings)
    frame = insights.reclaimable_by_namespace(candidates)
    rows = sorted(tuple(r) for r in frame.collect())
    ledger_bytes = sum(
        1000 + i % 1000
        for i, _, _, ok in P.EXPECTED_LEDGERS
        if ok and i not in P.CURSOR_OWNED_PROPOSED
    )
    t2_bytes = sum(1000 + i % 1000 for i in P.CURSOR_OWNED_PROPOSED)
    expected = [
        ("(unknown)", 0, 0, 1, 10000, 10000),  # the U9 upload: no ML name known
        ("public/default", 10, ledger_bytes, 1, 10000, ledger_bytes + 10000),  # U0, of ledger 31
        ("t2/ns2", 8, t2_bytes, 0, 0, t2_bytes),  # compacted ledgers and buckets
    ]
    assert expected == rows
