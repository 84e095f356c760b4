"""The two ways of joining references to ledgers agree, at every edge of a bitmap block."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from services.scan.analysis import references as R
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import analyze
from services.scan.schema import extract_from_rows
from tests.scan import planted as P

DELETED = R.REF_BITS["ml_list_bookkeeper_deleted"]
#: Ids at the edges of blocks (the first and last of a block, the largest id a long holds)
#: and one id per combination of reference bits, all in one block.
EDGE_IDS = [0, 1, 4095, 4096, 4097, 8191, 8192, 2**32 + 1, 2**62, 2**63 - 1]
COMBINATION_BASE = 10 * R.BLOCK_IDS


def _reference_rows() -> list[tuple[int, int, int | None]]:
    """(ledger_id, ref_bit, bk_deleted_mtime_ms): one or two references per edge id, and
    every combination of bits as separate references (so the bytes 0 to 63 all occur)."""
    rows: list[tuple[int, int, int | None]] = []
    bits = list(R.REF_BITS.values())
    for n, ledger_id in enumerate(EDGE_IDS):
        rows.append(
            (ledger_id, bits[n % len(bits)], 1000 + n if bits[n % len(bits)] == DELETED else None)
        )
        if n % 3 == 0:
            rows.append((ledger_id, DELETED, 2000 + n))
            rows.append((ledger_id, DELETED, 1500 + n))
    for combination in range(2 ** len(bits)):
        for bit in bits:
            if combination & bit:
                mtime = 3000 + combination if bit == DELETED else None
                rows.append((COMBINATION_BASE + combination, bit, mtime))
    return rows


def _expected(rows: list[tuple[int, int, int | None]], ids: list[int]) -> set[tuple[Any, ...]]:
    found: dict[int, tuple[int, int | None]] = {}
    for ledger_id, bit, mtime in rows:
        bits, newest = found.get(ledger_id, (0, None))
        if mtime is not None:
            newest = mtime if newest is None else max(newest, mtime)
        found[ledger_id] = (bits | bit, newest)
    expected = set()
    for ledger_id in ids:
        bits, newest = found.get(ledger_id, (0, None))
        live = None if not bits else bool(bits & R.LIVE_BITS)
        expected.add((ledger_id, bits or None, live, newest))
    return expected


def _joined(ledgers: DataFrame, refs: R.References) -> set[tuple[Any, ...]]:
    columns = ("ledger_id", "ref_bits", "live", "bk_deleted_mtime_ms")
    return {tuple(row) for row in R.join_references(ledgers, refs).select(*columns).collect()}


def test_bitmaps_and_rows_give_every_ledger_the_same_references(spark: SparkSession) -> None:
    """Block edges, ids no reference names (beside ones that are named), repeated references
    and all 64 combinations of bits: the bitmap join and the per-ledger join agree, and
    both match what the references say."""
    rows = _reference_rows()
    named = {ledger_id for ledger_id, _, _ in rows}
    unnamed = [2, 4094, 8190, 8193, 2**32, 2**63 - 2, COMBINATION_BASE + 64]
    ids = sorted(named | set(unnamed))
    ledgers = spark.createDataFrame([(i,) for i in ids], "ledger_id long")
    reference_rows = spark.createDataFrame(
        rows, "ledger_id long, ref_bit int, bk_deleted_mtime_ms long"
    )
    deleted = (
        reference_rows.filter(F.col("bk_deleted_mtime_ms").isNotNull())
        .groupBy("ledger_id")
        .agg(F.max("bk_deleted_mtime_ms").alias("bk_deleted_mtime_ms"))
    )
    expected = _expected(rows, ids)
    assert _joined(ledgers, R.References(reference_rows, deleted, None)) == expected
    bitmaps = R.reference_bitmaps(reference_rows)
    assert _joined(ledgers, R.References(reference_rows, deleted, bitmaps)) == expected


def test_too_many_blocks_take_the_per_ledger_join(spark: SparkSession) -> None:
    """Beyond the most blocks a broadcast may hold, the references are joined per ledger."""
    extract = extract_from_rows(spark, P.planted_rows())
    tables = (extract.managed_ledgers, extract.ml_ledgers, extract.cursors, extract.schemas)
    assert R.references(*tables).bitmaps is not None
    assert R.references(*tables, max_blocks=1).bitmaps is None


def test_the_analysis_finds_the_same_either_way(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every planted ledger's finding, every column, is the same through either join."""
    extract = extract_from_rows(spark, P.planted_rows())
    config = AnalyzeConfig(cluster=P.CLUSTER)
    by_bitmaps = analyze(extract, config, now_ms=P.NOW)
    monkeypatch.setattr(R, "MAX_BITMAP_BLOCKS", 0)
    by_rows = analyze(extract, config, now_ms=P.NOW)
    assert by_bitmaps.references is not None
    assert by_bitmaps.references.bitmaps is not None
    assert by_rows.references is not None
    assert by_rows.references.bitmaps is None
    found = [
        sorted((tuple(r) for r in analysis.ledger_findings.collect()), key=repr)
        for analysis in (by_bitmaps, by_rows)
    ]
    assert found[0] == found[1]
    assert len(found[0]) == len(P.EXPECTED_LEDGERS)
