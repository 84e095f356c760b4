"""The whole analysis run on a written extract: findings, candidates, summary and report."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import DataFrame, SparkSession

from services.scan.analysis import report_data
from services.scan.analysis.candidates import deletable, ledger_candidates, object_candidates
from services.scan.analysis.classify import DELETABLE_KINDS
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import AnalysisOutcome, run_analysis
from services.scan.cli.reconcile import reconcile
from services.scan.schema import extract_from_rows, write_extract
from tests.scan import planted as P


@pytest.fixture(scope="module")
def extract_dir(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("extract")
    write_extract(extract_from_rows(spark, P.planted_rows()), path)
    return path


@pytest.fixture(scope="module")
def allowed(
    spark: SparkSession, extract_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AnalysisOutcome:
    # The planted extract is mostly orphans on purpose, so the share limit is lifted.
    config = AnalyzeConfig(cluster=P.CLUSTER, max_orphan_share=1.0)
    return run_analysis(spark, extract_dir, tmp_path_factory.mktemp("out"), config)


@pytest.fixture(scope="module")
def refused(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> AnalysisOutcome:
    rows = P.planted_rows()
    rows["scan_manifest"].append(P.task("bk_ledgers", "failed", "session expired"))
    rows["offload_objects"].append(
        P.obj(f"{P.U9}-ledger-5", uuid=P.U9, ledger_id=5, cluster_name="other")
    )
    path = tmp_path_factory.mktemp("extract-refused")
    write_extract(extract_from_rows(spark, rows), path)
    config = AnalyzeConfig(cluster=P.CLUSTER)
    return run_analysis(spark, path, tmp_path_factory.mktemp("out-refused"), config)


def test_allowed_run_writes_its_candidates(spark: SparkSession, allowed: AnalysisOutcome) -> None:
    """A clean scan yields the 18 ledger (two of them open orphans, eight compacted ledgers
    and buckets) and 2 offload candidates, also in summary.json."""
    written = spark.read.parquet(str(allowed.out_dir / "candidates")).count()
    summary = json.loads((allowed.out_dir / "summary.json").read_text())
    assert (
        written,
        summary["refused"],
        summary["candidates"]["ledgers"],
        summary["candidates"]["objects"],
    ) == (20, False, 18, 2)


def test_findings_are_written_for_every_ledger_and_object(
    spark: SparkSession, allowed: AnalysisOutcome
) -> None:
    """The findings datasets hold one row per planted ledger and object."""
    ledgers = spark.read.parquet(str(allowed.out_dir / "findings/ledgers")).count()
    objects = spark.read.parquet(str(allowed.out_dir / "findings/objects")).count()
    assert (len(P.EXPECTED_LEDGERS), len(P.EXPECTED_OBJECTS)) == (ledgers, objects)


def test_findings_are_partitioned_by_kind(spark: SparkSession, allowed: AnalysisOutcome) -> None:
    """Each kind's findings sit in their own folder (`kind=topic_gone/`), and the folder
    names give back every row's kind."""
    for table in ("findings/ledgers", "findings/objects"):
        path = allowed.out_dir / table
        folders = {p.name.removeprefix("kind=") for p in path.glob("kind=*")}
        kinds = {r["kind"] for r in spark.read.parquet(str(path)).select("kind").collect()}
        assert folders == kinds
        assert "referenced" in kinds


def test_candidates_never_read_the_referenced_findings(
    spark: SparkSession, allowed: AnalysisOutcome, tmp_path: Path
) -> None:
    """Candidates drawn from written findings never open the folder of referenced ones (the
    deletable filter reaches the files as a filter on the partition column): with that
    folder's files made unreadable, the same candidates come out."""
    expected = sorted(ledger_candidates(_findings(spark, allowed.out_dir)).collect())
    copy = tmp_path / "findings"
    shutil.copytree(allowed.out_dir / "findings", copy)
    for part in (copy / "ledgers" / "kind=referenced").glob("part-*"):
        part.write_bytes(b"not parquet")
    assert sorted(ledger_candidates(_findings(spark, copy.parent)).collect()) == expected
    read = {r["kind"] for r in deletable(_findings(spark, copy.parent)).select("kind").collect()}
    assert read
    assert read <= set(DELETABLE_KINDS)


def _findings(spark: SparkSession, out_dir: Path, tier: str = "ledgers") -> DataFrame:
    return spark.read.parquet(str(out_dir / "findings" / tier))


def test_object_candidates_never_read_the_referenced_objects(
    spark: SparkSession, allowed: AnalysisOutcome, tmp_path: Path
) -> None:
    """An upload is referenced or not as a whole (by its ledger id and uuid), so grouping
    the uploads with a deletable object never needs a referenced one: with the referenced
    objects' files made unreadable, the same offload candidates come out."""
    expected = sorted(object_candidates(_findings(spark, allowed.out_dir, "objects")).collect())
    assert expected
    copy = tmp_path / "findings"
    shutil.copytree(allowed.out_dir / "findings", copy)
    referenced = list((copy / "objects" / "kind=referenced").glob("part-*"))
    assert referenced
    for part in referenced:
        part.write_bytes(b"not parquet")
    assert sorted(object_candidates(_findings(spark, copy.parent, "objects")).collect()) == expected


def test_referenced_ledgers_are_not_judged_by_owner(
    spark: SparkSession, allowed: AnalysisOutcome
) -> None:
    """A referenced ledger's owner is not looked up: `owner_exists` and `owner_namespace`
    are null (not false) for it, and set for every other ledger with an owner."""
    rows = spark.read.parquet(str(allowed.out_dir / "findings/ledgers")).collect()
    referenced = [r for r in rows if r["kind"] == "referenced"]
    assert referenced
    assert all(r["owner_exists"] is None and r["owner_namespace"] is None for r in referenced)
    judged = [r for r in rows if r["kind"] != "referenced" and r["role"] is not None]
    assert judged
    assert all(r["owner_exists"] is not None for r in judged)


def test_report_is_one_file_with_its_csvs_beside_it(allowed: AnalysisOutcome) -> None:
    """report.html draws its charts inline (no image file); items.csv holds every item that
    is not referenced (objects one by one), the proposed ones first: 18 ledgers and the 4
    objects of the 2 orphan uploads; tasks.csv every extract task."""
    page = (allowed.out_dir / "report.html").read_text()
    with (allowed.out_dir / "items.csv").open() as f:
        items = list(csv.DictReader(f))
    with (allowed.out_dir / "tasks.csv").open() as f:
        tasks = list(csv.DictReader(f))
    summary = allowed.summary
    proposed = [row["proposed"] for row in items]
    assert (page.count("<svg"), "<img" in page, (allowed.out_dir / "plots").exists()) == (
        3,
        False,
        False,
    )
    assert (len(items), proposed.count("true"), proposed[:22]) == (
        summary["items"]["total"],
        22,
        ["true"] * 22,
    )
    assert (len(tasks), summary["coverage"]["tasks"]) == (
        len(P.planted_rows()["scan_manifest"]),
    ) * 2
    order = [(row["proposed"] == "true", int(row["size_bytes"])) for row in items]
    assert order == sorted(order, reverse=True)


def test_items_csv_is_its_parts_in_order_under_one_header(tmp_path: Path) -> None:
    """The sorted parts are joined in name order, each part's header dropped but the first;
    with no part at all, the file is the header alone."""
    for index, rows in enumerate(["1\n2\n", "3\n", "4\n5\n"]):
        (tmp_path / f"part-0000{index}-x.csv").write_text("n\n" + rows)
    report_data._concatenate_csv(sorted(tmp_path.glob("part-*")), tmp_path / "all.csv", ["n"])
    assert (tmp_path / "all.csv").read_text() == "n\n1\n2\n3\n4\n5\n"
    report_data._concatenate_csv([], tmp_path / "none.csv", ["a", "b"])
    assert (tmp_path / "none.csv").read_text() == "a,b\n"


def test_summary_holds_what_the_report_draws(allowed: AnalysisOutcome) -> None:
    """Coverage per table kind, the age bins (the window is an edge) and the submit plan."""
    summary = allowed.summary
    kinds = [k["kind"] for k in summary["coverage"]["by_kind"]]
    plan = summary["submit_plan"]
    assert kinds == sorted({task["kind"] for task in P.planted_rows()["scan_manifest"]})
    assert 3 * 86_400 in summary["age_histogram"]["edges_s"]
    assert sum(g["count"] for g in plan["by_component"]) == summary["candidates"]["count"]


def test_summary_reports_reclaimable_bytes(allowed: AnalysisOutcome) -> None:
    """Reclaimable bytes are those of the deletable ledgers and orphan objects."""
    ledger_bytes = sum(1000 + i % 1000 for i, _, _, ok in P.EXPECTED_LEDGERS if ok)
    object_bytes = 4 * 5000  # two orphan uploads of two objects each
    assert ledger_bytes + object_bytes == allowed.summary["reclaimable_bytes_total"]


def test_refused_run_states_every_reason_and_proposes_nothing(
    spark: SparkSession, refused: AnalysisOutcome
) -> None:
    """Failed task and orphan share are both named (another cluster's object is excluded,
    not a reason); no candidate is written."""
    summary = json.loads((refused.out_dir / "summary.json").read_text())
    reasons = summary["refusal_reasons"]
    written = spark.read.parquet(str(refused.out_dir / "candidates")).count()
    assert (summary["refused"], summary["candidates"]["count"], written) == (True, 0, 0)
    assert [
        any("bk_ledgers-0 (bk_ledgers /) failed: session expired" in r for r in reasons),
        any("of Pulsar-owned ledgers look orphaned" in r for r in reasons),
        any("'other'" in r for r in reasons),
    ] == [True, True, False]


def test_refused_report_says_no_deletion_and_draws_no_chart(refused: AnalysisOutcome) -> None:
    """The human report leads with the refusal and charts nothing of the untrusted scan."""
    page = (refused.out_dir / "report.html").read_text()
    assert ("REFUSED: no deletion proposed." in page, "<svg" in page) == (True, False)


def test_cli_submit_settings_are_checked_before_spark(tmp_path: Path) -> None:
    """--submit with a batch of 0 is a usage error (exit 2, naming the option) before any Spark
    work or call."""
    result = CliRunner().invoke(
        reconcile,
        [
            "analyze",
            "--extract",
            str(tmp_path / "missing"),
            "--out",
            str(tmp_path / "o"),
            "--cluster",
            "c1",
            "--submit",
            "--submit-batch",
            "0",
        ],
    )
    assert (result.exit_code, "'--submit-batch'" in result.output) == (2, True)


def test_cli_rejects_short_min_age_without_override(tmp_path: Path) -> None:
    """A window below the floor is refused before any Spark work."""
    result = CliRunner().invoke(
        reconcile,
        [
            "analyze",
            "--extract",
            str(tmp_path),
            "--out",
            str(tmp_path / "o"),
            "--cluster",
            "c1",
            "--min-age",
            "2h",
        ],
    )
    assert (result.exit_code, "below the floor" in result.output) == (1, True)


def test_cli_is_registered_in_the_tombstone_command() -> None:
    """`tombstone reconcile analyze --help` works through the lazy command group."""
    from services.cli import cli

    result = CliRunner().invoke(cli, ["reconcile", "analyze", "--help"])
    assert (result.exit_code, "--max-orphan-share" in result.output) == (0, True)
