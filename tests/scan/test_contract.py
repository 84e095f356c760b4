"""The extract contract, the configuration and Pulsar naming rules."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from services.core.errors import CorruptData, InvalidArgument, NotFound
from services.scan.analysis.config import AnalyzeConfig, parse_duration
from services.scan.analysis.names import ml_name_of_topic, namespace_of_ml
from services.scan.schema import (
    BK_LEDGERS,
    TABLES,
    WIDENED_COLUMNS,
    conform,
    extract_from_rows,
    read_extract,
)


def test_conform_rejects_a_missing_column(spark: SparkSession) -> None:
    """A table without ledger_id is corrupt, never read as all-null."""
    frame = spark.createDataFrame([(1,)], "state int")
    with pytest.raises(CorruptData, match="has no column 'ledger_id'"):
        conform(frame, BK_LEDGERS, "bk_ledgers")


def test_conform_rejects_a_mistyped_column(spark: SparkSession) -> None:
    """An int ledger_id (ids ≥ 2^31 would not fit) is refused with both types named."""
    frame = extract_from_rows(spark, {}).bk_ledgers.withColumn("ledger_id", F.lit(1))
    with pytest.raises(CorruptData, match="'ledger_id' is int, expected bigint"):
        conform(frame, BK_LEDGERS, "bk_ledgers")


def test_an_extract_with_32_bit_versions_reads_them_widened(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A run directory written when the version columns were int (before Oxia's 64-bit
    version ids) is still analysable: its versions read as bigint, unchanged."""
    rows: dict[str, list[dict[str, object]]] = {
        "bk_ledgers": [{"ledger_id": 1, "znode_version": 2**31 - 1}],
        "managed_ledgers": [{"ml_name": "t/ns/persistent/a", "znode_version": 3}],
        "cursors": [{"ml_name": "t/ns/persistent/a", "cursor_name": "c", "znode_version": 4}],
        "schemas": [{"schema_id": "t/ns/a", "locator_version": 5}],
    }
    current = extract_from_rows(spark, rows)
    for table in TABLES:
        frame = getattr(current, table)
        for column in WIDENED_COLUMNS.get(table, ()):
            frame = frame.withColumn(column, F.col(column).cast("int"))
        frame.write.parquet(str(tmp_path / table))
    read = read_extract(spark, tmp_path)
    for table, columns in WIDENED_COLUMNS.items():
        (column,) = columns
        frame = getattr(read, table)
        assert (dict(frame.dtypes)[column], frame.collect()[0][column]) == (
            "bigint",
            rows[table][0][column],
        )


def test_read_extract_names_a_missing_table(spark: SparkSession, tmp_path: Path) -> None:
    """An empty run directory is reported table by table."""
    with pytest.raises(NotFound, match="no table 'bk_ledgers'"):
        read_extract(spark, tmp_path)


def test_rows_with_unknown_columns_are_rejected(spark: SparkSession) -> None:
    """A typo in a hand-built extract fails instead of vanishing."""
    with pytest.raises(CorruptData, match="ledgerid"):
        extract_from_rows(spark, {"bk_ledgers": [{"ledgerid": 1}]})


def test_topic_names_map_to_ml_names(spark: SparkSession) -> None:
    """V2 and V1 names map like TopicName.getPersistenceNamingEncoding (URL-encoded local)."""
    topics = [
        "persistent://public/default/my topic-partition-0",
        "persistent://t/c/ns/a/b",
        "non-persistent://t/ns/x",
    ]
    frame = spark.createDataFrame([(t,) for t in topics], "topic string")
    rows = frame.select(ml_name_of_topic(F.col("topic")).alias("ml")).collect()
    expected = [
        "public/default/persistent/my+topic-partition-0",
        "t/c/ns/persistent/a%2Fb",
        None,
    ]
    assert expected == [r["ml"] for r in rows]


def test_namespaces_of_ml_names(spark: SparkSession) -> None:
    """V2 ML names give tenant/ns, V1 tenant/cluster/ns."""
    names = ["public/default/persistent/x", "t/c/ns/persistent/y"]
    frame = spark.createDataFrame([(n,) for n in names], "ml string")
    rows = frame.select(namespace_of_ml(F.col("ml")).alias("ns")).collect()
    assert [r["ns"] for r in rows] == ["public/default", "t/c/ns"]


def test_min_age_below_floor_needs_the_override() -> None:
    """Two hours is refused; with the override it is accepted and flagged."""
    with pytest.raises(InvalidArgument, match="min_age"):
        AnalyzeConfig(cluster="c1", min_age=timedelta(hours=2))
    config = AnalyzeConfig(cluster="c1", min_age=timedelta(hours=2), allow_short_min_age=True)
    assert (config.below_floor, config.min_age_ms) == (True, 7_200_000)


def test_cluster_is_required() -> None:
    """Without a cluster name objects cannot be checked."""
    with pytest.raises(InvalidArgument, match="cluster"):
        AnalyzeConfig(cluster="")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3d", timedelta(days=3)),
        ("12h", timedelta(hours=12)),
        ("2w", timedelta(weeks=2)),
        ("1d12h", timedelta(hours=36)),
        ("90", timedelta(seconds=90)),
    ],
)
def test_durations_parse(text: str, expected: timedelta) -> None:
    """The reconciler's options use the services' one duration syntax."""
    assert expected == parse_duration(text)


@pytest.mark.parametrize("text", ["d", "-1d", "3 days", "12h1d"])
def test_bad_durations_are_rejected(text: str) -> None:
    """Anything but the one duration syntax is an invalid argument."""
    with pytest.raises(InvalidArgument):
        parse_duration(text)
