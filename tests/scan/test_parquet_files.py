"""Driver-side reads of Spark's Parquet output: rows, counts and footers without a job."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from services.scan import parquet_files


def _table(tmp_path: Path) -> Path:
    """A table directory as Spark leaves it: part files, a `_SUCCESS` marker, `.crc` files."""
    table = tmp_path / "counts"
    table.mkdir()
    for n, ids in enumerate(([1, 2], [3])):
        part = table / f"part-0000{n}-c000.snappy.parquet"
        data = pa.table({"ledger_id": ids, "kind": ["a"] * len(ids)})
        pq.write_table(data.replace_schema_metadata({b"spark": b"schema"}), part)
        (table / f".{part.name}.crc").write_bytes(b"crc")
    (table / "_SUCCESS").write_bytes(b"")
    return table


def test_rows_counts_and_footer_of_a_table(tmp_path: Path) -> None:
    table = _table(tmp_path)
    assert sorted(r["ledger_id"] for r in parquet_files.rows(table)) == [1, 2, 3]
    assert parquet_files.rows(table, columns=["kind"])[0] == {"kind": "a"}
    assert parquet_files.row_count(table) == 3
    assert (parquet_files.first_footer(table) or {}).get(b"spark") == b"schema"


def test_a_table_without_files_has_no_rows_and_no_footer(tmp_path: Path) -> None:
    assert parquet_files.row_count(tmp_path) == 0
    assert parquet_files.first_footer(tmp_path) is None
