"""Findings whose owner names are not canonical are reported, never candidates."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from services.scan.analysis.candidates import deletion_candidates
from services.scan.analysis.canonical import (
    NONCANONICAL,
    PLAIN_CURSOR_NAME,
    PLAIN_ML_NAME,
    check_names,
    owner_name_problem,
    plainly_canonical,
)
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import analyze, run_analysis
from services.scan.schema import extract_from_rows, write_extract
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


def _aliased_rows() -> dict[str, list[dict[str, object]]]:
    """The planted world with orphans whose custom metadata or object metadata names an
    alias of an owner (ledgers 900-902, object of ledger 903)."""
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
    return rows


def _assert_aliases_rejected(ledger_findings: DataFrame, object_findings: DataFrame) -> None:
    ledgers = {
        r["ledger_id"]: (r["kind"], r["deletable"], r["name_problem"] is not None)
        for r in ledger_findings.select("ledger_id", "kind", "deletable", "name_problem").collect()
    }
    objects = {
        (r["ledger_id"], r["kind"], r["deletable"])
        for r in object_findings.select("ledger_id", "kind", "deletable").collect()
    }
    candidates = {
        r["ledger_id"]
        for r in deletion_candidates(ledger_findings, object_findings).select("ledger_id").collect()
    }
    assert [ledgers[i] for i in (900, 901, 902)] == [(NONCANONICAL, False, True)] * 3
    assert (903, NONCANONICAL, False) in objects
    assert (candidates & {900, 901, 902, 903}, 100 in candidates) == (set(), True)
    # The canonical orphans keep their kind and no problem.
    assert ledgers[100][1:] == (True, False)


def test_noncanonical_owners_are_reported_and_never_proposed(spark: SparkSession) -> None:
    """Orphans whose owner names are aliases are kind `noncanonical_name`, not deletable,
    with their problem, and absent from the candidates; the canonical orphans beside them
    still are candidates (`check_names`, on findings in memory)."""
    analysis = analyze(
        extract_from_rows(spark, _aliased_rows()), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW
    )
    _assert_aliases_rejected(
        check_names(analysis.ledger_findings, F.col("pdli_component")),
        check_names(analysis.object_findings, F.lit("MANAGED_LEDGER")),
    )


def test_the_job_rewrites_findings_with_noncanonical_names(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The job checks the names of the written findings: with aliases among the orphans,
    the findings on disk are written again with them rejected, and neither their candidates
    nor anything left of the first write remains."""
    write_extract(extract_from_rows(spark, _aliased_rows()), tmp_path / "extract")
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    outcome = run_analysis(spark, tmp_path / "extract", tmp_path / "out", config)
    findings = tmp_path / "out" / "findings"
    _assert_aliases_rejected(
        spark.read.parquet(str(findings / "ledgers")), spark.read.parquet(str(findings / "objects"))
    )
    proposed = {
        r["ledger_id"] for r in spark.read.parquet(str(outcome.out_dir / "candidates")).collect()
    }
    assert not proposed & {900, 901, 902, 903}
    assert sorted(p.name for p in findings.iterdir()) == ["ledgers", "objects"]


def test_canonical_findings_are_written_once(spark: SparkSession, tmp_path: Path) -> None:
    """Without a noncanonical name the findings are left as first written (no second
    write): every row's `name_problem` is null."""
    write_extract(extract_from_rows(spark, P.planted_rows()), tmp_path / "extract")
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    run_analysis(spark, tmp_path / "extract", tmp_path / "out", config)
    ledgers = tmp_path / "out" / "findings" / "ledgers"
    frame = spark.read.parquet(str(ledgers))
    assert frame.filter(F.col("name_problem").isNotNull()).count() == 0
    assert frame.filter(F.col("deletable")).count() > 0


def test_the_classification_runs_once(spark: SparkSession) -> None:
    """The findings' plan aggregates the references once (into their bitmaps, cached) and
    has no Python operator: the names are checked on the written findings (a Python column
    beside the classification queued every whole finding row)."""
    analysis = analyze(
        extract_from_rows(spark, P.planted_rows()), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW
    )
    for findings in (analysis.ledger_findings, analysis.object_findings):
        plan = findings._jdf.queryExecution().executedPlan().toString()
        assert "ArrowEvalPython" not in plan, plan
    ledgers = analysis.ledger_findings._jdf.queryExecution().optimizedPlan().toString()
    assert "InMemoryRelation [ref_block" in ledgers, ledgers
    assert "bit_or(" not in ledgers, ledgers


Owner = tuple[str | None, str | None, str | None]
#: Near misses: names of (almost) the plain form that Python must check, or that are wrong.
NEAR_MISSES: list[Owner] = [
    ("MANAGED_LEDGER", "t/ns/persistent/x\n", None),
    ("MANAGED_LEDGER", "t/ns/persistent/..", None),
    ("MANAGED_LEDGER", "t/ns/persistent/.", None),
    ("MANAGED_LEDGER", "./ns/persistent/x", None),
    ("MANAGED_LEDGER", "t/../persistent/x", None),
    ("MANAGED_LEDGER", "t/ns/persistent/", None),
    ("MANAGED_LEDGER", "t/ns/persistent/a/b", None),
    ("MANAGED_LEDGER", "t/ns/non-persistent/x", None),
    ("MANAGED_LEDGER", "t/c/ns/persistent/x", None),
    ("MANAGED_LEDGER", "t/ns/persistent/a%20b", None),
    ("MANAGED_LEDGER", "t/ns/persistent/a+b", None),
    ("MANAGED_LEDGER", "t/ns/persistent/caf\u00e9", None),
    ("MANAGED_LEDGER", "t" * 256 + "/ns/persistent/x", None),
    ("MANAGED_CURSOR", "t/ns/persistent/x", ".."),
    ("MANAGED_CURSOR", "t/ns/persistent/x", "sub\n"),
    ("MANAGED_CURSOR", "t/ns/persistent/x", "a%2Fb"),
    ("SCHEMA_STORAGE", None, None),
    (None, "t/ns/persistent/x", None),
]
_SEGMENT = st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True)
_OWNERS = st.tuples(
    st.sampled_from(["MANAGED_LEDGER", "MANAGED_CURSOR", "COMPACTED_LEDGER", "SCHEMA_STORAGE"]),
    st.one_of(
        st.none(),
        st.builds(lambda a, b, c: f"{a}/{b}/persistent/{c}", _SEGMENT, _SEGMENT, _SEGMENT),
        st.text(max_size=30),
    ),
    st.one_of(st.none(), _SEGMENT, st.text(max_size=10)),
)


def _plain(spark: SparkSession, owners: list[Owner]) -> list[bool]:
    frame = spark.createDataFrame(owners, "component string, ml string, cursor string")
    judged = plainly_canonical(F.col("component"), F.col("ml"), F.col("cursor"))
    rows = frame.select(F.coalesce(judged, F.lit(False)).alias("plain")).collect()
    return [row["plain"] for row in rows]


def test_near_misses_are_not_plain(spark: SparkSession) -> None:
    """Dot segments, a final line break, escapes, `+`, a V1 name, another domain, a long
    tenant, a schema and an unknown component all go to the Python check."""
    assert not any(_plain(spark, NEAR_MISSES))
    assert all(_plain(spark, [("MANAGED_CURSOR", "t.1/ns_2/persistent/a-b...c", "sub.x")]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(_OWNERS, min_size=20, max_size=40))
def test_plain_names_are_canonical(spark: SparkSession, batch: list[Owner]) -> None:
    """Whatever the JVM's regular expressions (`PLAIN_ML_NAME`, `PLAIN_CURSOR_NAME`) let
    skip the Python check, the Python check accepts: plain implies canonical."""
    assert PLAIN_ML_NAME.endswith("\\z")
    assert PLAIN_CURSOR_NAME.endswith("\\z")
    for owner, plain in zip(batch, _plain(spark, batch), strict=True):
        if plain:
            component, ml, cursor = owner
            assert owner_name_problem(component, ml, cursor, None) is None, owner
