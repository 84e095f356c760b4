"""A bucket shared by several Pulsar clusters: another cluster's objects are excluded and
reported, never proposed; an extract made without HEAD (acknowledged) is flagged as risky;
an extract older than the HEAD record reads as unknown."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from services.scan.analysis.clusters import HEAD_UNRECORDED
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import AnalysisOutcome, run_analysis
from services.scan.schema import extract_from_rows, read_extract, write_extract
from tests.scan import planted as P

#: Another cluster's upload of *our* ledger id 31 (ids are per cluster), and one of an id we
#: do not have; both older than the window and unlisted: orphans, were they ours.
EAST = P.pair(P.U9, 31, cluster_name="east", managed_ledger_name=P.OFFL)
WEST = [P.obj(f"{P.U8}-ledger-5", uuid=P.U8, ledger_id=5, cluster_name="west")]
FOREIGN_KEYS = {o["key"] for o in EAST + WEST}


def _analyse(spark: SparkSession, tmp: Path, rows: dict[str, list[P.Row]]) -> AnalysisOutcome:
    write_extract(extract_from_rows(spark, rows), tmp / "extract")
    # The planted extract is mostly orphans on purpose, so the share limit is lifted.
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    return run_analysis(spark, tmp / "extract", tmp / "out", config)


def _items(out: Path) -> dict[str, dict[str, str]]:
    with (out / "items.csv").open() as f:
        return {row["key"]: row for row in csv.DictReader(f) if row["source"] == "object"}


@pytest.fixture(scope="module")
def plain(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> AnalysisOutcome:
    return _analyse(spark, tmp_path_factory.mktemp("plain"), P.planted_rows())


@pytest.fixture(scope="module")
def shared(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> AnalysisOutcome:
    rows = P.planted_rows()
    rows["offload_objects"] += EAST + WEST
    return _analyse(spark, tmp_path_factory.mktemp("shared"), rows)


def test_other_clusters_objects_are_excluded_not_refused(
    spark: SparkSession, shared: AnalysisOutcome, plain: AnalysisOutcome
) -> None:
    """Not a refusal; each is `other_cluster`, not deletable, in no candidate; the candidates
    and the orphan shares are those of the same bucket without them."""
    findings = spark.read.parquet(str(shared.out_dir / "findings" / "objects")).collect()
    kinds = {r["key"]: (r["kind"], r["deletable"]) for r in findings if r["key"] in FOREIGN_KEYS}
    candidates = spark.read.parquet(str(shared.out_dir / "candidates")).collect()
    keys = {k for c in candidates for k in c["object_keys"] or []}
    assert (shared.verdict.reasons, kinds) == (
        (),
        dict.fromkeys(FOREIGN_KEYS, ("other_cluster", False)),
    )
    assert (keys & FOREIGN_KEYS, shared.summary["candidates"]) == (
        set(),
        plain.summary["candidates"],
    )
    assert shared.summary["orphan_share"] == plain.summary["orphan_share"]


def test_summary_counts_other_clusters_objects_by_name(shared: AnalysisOutcome) -> None:
    """summary.json: objects and bytes per foreign cluster, most objects first."""
    summary = json.loads((shared.out_dir / "summary.json").read_text())
    assert summary["other_clusters"] == {
        "objects": 3,
        "bytes": 15000,
        "by_cluster": [
            {"cluster_name": "east", "objects": 2, "bytes": 10000},
            {"cluster_name": "west", "objects": 1, "bytes": 5000},
        ],
    }
    assert (summary["risky_options"], summary["warnings"], summary["scan"]["objects_headed"]) == (
        [],
        [],
        True,
    )


def test_report_lists_them_as_excluded_with_their_cluster(shared: AnalysisOutcome) -> None:
    """items.csv and report.html say which cluster each belongs to."""
    items = _items(shared.out_dir)
    page = (shared.out_dir / "report.html").read_text()
    assert {k: items[k]["reason"] for k in FOREIGN_KEYS} == {
        **{o["key"]: "excluded: belongs to cluster east" for o in EAST},
        **{o["key"]: "excluded: belongs to cluster west" for o in WEST},
    }
    assert ["id='other-clusters'" in page, "excluded: belongs to cluster west" in page] == [
        True,
        True,
    ]


def _no_head_rows() -> dict[str, list[P.Row]]:
    """What an extract made with --no-head-objects holds: no object names an owner or a
    cluster; east's upload of ledger 31 is among them, unseen."""
    rows = P.planted_rows()
    rows["offload_objects"] = [
        o | {"cluster_name": None, "managed_ledger_name": None}
        for o in rows["offload_objects"] + EAST
    ]
    rows["scan_run"][0]["objects_headed"] = False
    return rows


@pytest.fixture(scope="module")
def no_head(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> AnalysisOutcome:
    return _analyse(spark, tmp_path_factory.mktemp("no-head"), _no_head_rows())


def test_no_head_extract_is_a_risky_option_of_the_run(no_head: AnalysisOutcome) -> None:
    """summary.json names --no-head-objects; the report's banner shows it."""
    summary = json.loads((no_head.out_dir / "summary.json").read_text())
    page = (no_head.out_dir / "report.html").read_text()
    assert (summary["risky_options"], summary["scan"]["objects_headed"]) == (
        ["--no-head-objects"],
        False,
    )
    assert ["id='risky'" in page, "<code>--no-head-objects</code>" in page] == [True, True]


def test_no_head_objects_are_of_unknown_cluster(no_head: AnalysisOutcome) -> None:
    """Every Pulsar-named object counts as of unknown cluster; east's unseen upload of our
    ledger 31 is proposed (the acknowledged risk), and its reason says the cluster is
    unknown."""
    summary = json.loads((no_head.out_dir / "summary.json").read_text())
    items = _items(no_head.out_dir)
    east = {o["key"] for o in EAST}
    assert summary["unattributed_objects"]["objects"] == 14  # all but notes/readme.txt
    assert summary["other_clusters"]["objects"] == 0
    assert {items[k]["proposed"] for k in east} == {"true"}
    assert "of unknown cluster" in (no_head.out_dir / "report.html").read_text()


def test_extract_without_the_head_record_reads_as_unknown(
    spark: SparkSession, tmp_path: Path
) -> None:
    """An extract written before `objects_headed` existed is still read; the run warns that
    it does not know whether the objects were read with HEAD."""
    rows = P.planted_rows()
    write_extract(extract_from_rows(spark, rows), tmp_path / "extract")
    old_run = [{k: v for k, v in rows["scan_run"][0].items() if k != "objects_headed"}]
    spark.createDataFrame(old_run).write.mode("overwrite").parquet(
        str(tmp_path / "extract" / "scan_run")
    )
    assert read_extract(spark, tmp_path / "extract").scan_run.collect()[0]["objects_headed"] is None
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    outcome = run_analysis(spark, tmp_path / "extract", tmp_path / "out", config)
    assert (outcome.summary["warnings"], outcome.summary["risky_options"]) == (
        [HEAD_UNRECORDED],
        [],
    )
    assert (
        "does not record whether offloaded objects" in (outcome.out_dir / "report.html").read_text()
    )
