"""The ledger classification's plan stays small enough for the JVM to compile.

Every stage of the ledger findings must keep its generated per-row method under HotSpot's
8,000-byte `HugeMethodLimit`: a larger one is never JIT-compiled and every ledger runs
through the bytecode interpreter (10M ledgers took minutes). The classification grew past
it because each column reading `status` or `kind` carried its own copy of the large CASE,
and every segment a namespace rule looked at split the name again; the reading of the
ledgers with their broadcast references, in the same stage, took it past it again, and a
boundary now separates the two (`classify._stage_boundary`). At 10M ledgers the two stages'
largest methods are about 6,300 and 5,900 bytes (docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import Analysis, analyze
from services.scan.schema import extract_from_rows
from tests.scan import planted as P

#: HotSpot's `HugeMethodLimit`: larger methods are not compiled (`DontCompileHugeMethods`).
HUGE_METHOD_BYTES = 8000
#: What the reconciler's stage adds to the classification's own code: measured at 10M
#: ledgers, 7,133 bytes for the stage against about 6,030 for the projections alone, when
#: the references were a shuffled join; after `classify._stage_boundary`, 5,921 bytes.
JOINS_HEADROOM = 1500


@pytest.fixture
def whole_stage(spark: SparkSession) -> Iterator[None]:
    """Whole-stage code generation on, as the reconciler runs (the suite turns it off), and
    every join shuffled but the hinted reference bitmaps: each other join then ends a stage
    of its own, and the last stage holds the classification's projections alone."""
    spark.conf.set("spark.sql.codegen.wholeStage", "true")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    yield
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")


def _stage_sizes(text: str) -> list[tuple[int, str]]:
    """(largest method's bytes, the stage's root operator) of each generated stage."""
    return [
        (int(size), root) for size, root in re.findall(r"maxMethodCodeSize:(\d+);.*\n(.*)", text)
    ]


def _analysis(spark: SparkSession) -> Analysis:
    rows = P.planted_rows()
    return analyze(extract_from_rows(spark, rows), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW)


def test_each_decision_is_written_once(spark: SparkSession) -> None:
    """In the optimized plan of the ledger findings, each branch of the status, orphan-reason
    and kind expressions appears once: the columns that read them read a computed column."""
    plan = _analysis(spark).ledger_findings._jdf.queryExecution().optimizedPlan().toString()
    for branch in (
        "THEN unreadable",
        "THEN reference_unknown",
        "THEN in_use_open",
        "THEN schema_not_in_locator",
        "THEN bucket_unreferenced",
        "THEN too_young",
        "THEN replicated_undeclared",
    ):
        assert plan.count(branch) == 1, (branch, plan)


@pytest.mark.usefixtures("whole_stage")
def test_the_classification_alone_leaves_room_for_its_joins(spark: SparkSession) -> None:
    """The stage of the classification's projections (with one join) stays well under the
    JIT's limit: the reconciler's stage adds the broadcast owner and sharing joins to the
    same method."""
    findings = _analysis(spark).ledger_findings
    text = spark._jvm.PythonSQLUtils.explainString(  # type: ignore[union-attr]
        findings._jdf.queryExecution(), "codegen"
    )
    classifying = [size for size, root in _stage_sizes(text) if " AS namespace#" in root]
    assert len(classifying) == 1, text[:4000]
    assert classifying[0] < HUGE_METHOD_BYTES - JOINS_HEADROOM, text[:4000]


@pytest.fixture
def reconciler_stages(spark: SparkSession) -> Iterator[None]:
    """Whole-stage code generation on and broadcast joins allowed, as the reconciler runs
    (every side is small here, so every join is broadcast, as at ten million ledgers)."""
    spark.conf.set("spark.sql.codegen.wholeStage", "true")
    yield
    spark.conf.set("spark.sql.codegen.wholeStage", "false")


@pytest.mark.usefixtures("reconciler_stages")
def test_no_stage_of_the_findings_is_too_big_to_compile(spark: SparkSession) -> None:
    """The ledgers read and joined with their references, and the classification, are two
    stages, each under the JIT's limit: as one, they were about 11,500 bytes at 10M ledgers."""
    analysis = _analysis(spark)
    text = spark._jvm.PythonSQLUtils.explainString(  # type: ignore[union-attr]
        analysis.ledger_findings._jdf.queryExecution(), "codegen"
    )
    sizes = _stage_sizes(text)
    assert any("ref_block" in root or "ref_bytes" in root for _, root in sizes), text[:4000]
    assert max(size for size, _ in sizes) < HUGE_METHOD_BYTES, sizes
