"""Findings whose owner names are not canonical are reported, never candidates."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from services.scan.analysis.candidates import deletion_candidates
from services.scan.analysis.canonical import NONCANONICAL, owner_name_problem
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import analyze
from services.scan.schema import extract_from_rows
from tests.scan import planted as P

ALIAS = "public/default/./persistent/deleted-topic"  # a '.' namespace under cluster 'default'


@pytest.mark.parametrize(
    ("component", "ml", "cursor", "schema", "bad"),
    [
        ("MANAGED_LEDGER", P.GONE, None, None, False),
        ("MANAGED_LEDGER", ALIAS, None, None, True),
        ("MANAGED_LEDGER", P.GONE + "/", None, None, True),
        ("MANAGED_LEDGER", "public/default/persistent/%2E%2E", None, None, True),
        ("MANAGED_CURSOR", P.LIVE, "sub-a", None, False),
        ("MANAGED_CURSOR", P.LIVE, "..", None, True),
        ("SCHEMA_STORAGE", None, None, "public/default/live", False),
        ("SCHEMA_STORAGE", None, None, "public/default/live/", True),
        ("MANAGED_LEDGER", None, None, None, False),
    ],
)
def test_owner_name_problem(
    component: str, ml: str | None, cursor: str | None, schema: str | None, bad: bool
) -> None:
    """Dot, empty or trailing segments and escaped dots are problems; canonical names and
    absent names are not."""
    assert bad == (owner_name_problem(component, ml, cursor, schema) is not None)


def test_noncanonical_owners_are_reported_and_never_proposed(spark: SparkSession) -> None:
    """Orphans whose custom metadata or object metadata names an alias of an owner are kind
    `noncanonical_name`, not deletable, and absent from the candidates; the canonical
    orphans beside them still are candidates."""
    rows = P.planted_rows()
    rows["bk_ledgers"] += [
        P.data(900, ALIAS),
        P.cursor_ledger(901, P.LIVE, "../sub-a"),
        P.bk(902, component="schema", schema_id="public/default/./live"),
    ]
    rows["offload_objects"] += P.pair(P.U7, 903, managed_ledger_name=ALIAS)
    # With the namespaces listed, an alias's namespace (`public/default/.`) has no policies
    # and is set apart first (`unknown_namespace`, never proposed either): an extract
    # without the listing isolates the canonical check.
    rows["scan_manifest"] = [t for t in rows["scan_manifest"] if t["kind"] != "namespaces"]
    analysis = analyze(
        extract_from_rows(spark, rows), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW
    )
    ledgers = {
        r["ledger_id"]: (r["kind"], r["deletable"])
        for r in analysis.ledger_findings.select("ledger_id", "kind", "deletable").collect()
    }
    objects = {
        (r["ledger_id"], r["kind"], r["deletable"])
        for r in analysis.object_findings.select("ledger_id", "kind", "deletable").collect()
    }
    candidates = {
        r["ledger_id"]
        for r in deletion_candidates(analysis.ledger_findings, analysis.object_findings)
        .select("ledger_id")
        .collect()
    }
    assert [ledgers[i] for i in (900, 901, 902)] == [(NONCANONICAL, False)] * 3
    assert (903, NONCANONICAL, False) in objects
    assert (candidates & {900, 901, 902, 903}, 100 in candidates) == (set(), True)


def test_the_classification_runs_once(spark: SparkSession) -> None:
    """The name check adds one column to the findings: the plan behind the ledger findings
    aggregates the references once and evaluates the check once (a split into deletable and
    not, taken back together by a union, ran the whole classification twice)."""
    analysis = analyze(
        extract_from_rows(spark, P.planted_rows()), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW
    )
    for findings in (analysis.ledger_findings, analysis.object_findings):
        plan = findings._jdf.queryExecution().executedPlan().toString()
        assert plan.count("ArrowEvalPython") == 1, plan
        assert "Union" not in plan.split("ArrowEvalPython")[0], plan
    ledgers = analysis.ledger_findings._jdf.queryExecution().optimizedPlan().toString()
    assert ledgers.count("bit_or(") == 1, ledgers
