"""S3 Inventory files as object listings: CSV (headerless or with a header, gzipped or not)
and Parquet; malformed rows are errors naming the file and row."""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from services.core.errors import CorruptData, InvalidArgument
from services.scan.extract.inventory import InventoryRow, parse_schema, read_inventory

U = "6f1c1d8e-4b1f-4e0a-9a55-0123456789ab"
MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
EXPECTED = [
    InventoryRow("b1", f"{U}-ledger-7", 10, MS),
    InventoryRow("b1", "notes/a b.txt", 3, None),
]


def test_headerless_csv_in_manifest_order(tmp_path: Path) -> None:
    """Columns come from the fileSchema; keys are URL-decoded; a blank date is unknown."""
    path = tmp_path / "inv.csv"
    path.write_text(
        f'"b1","{U}-ledger-7","10","2026-01-01T00:00:00.000Z"\n"b1","notes/a%20b.txt","3",""\n'
    )
    schema = parse_schema("Bucket, Key, Size, LastModifiedDate")
    assert read_inventory(str(path), schema) == EXPECTED


def test_gzipped_csv_with_a_header(tmp_path: Path) -> None:
    """A header row names the columns, whatever their order."""
    body = (
        "key,bucket,size,last_modified_date\n"
        f"{U}-ledger-7,b1,10,2026-01-01T00:00:00Z\n"
        "notes/a%20b.txt,b1,3,\n"
    )
    path = tmp_path / "inv.csv.gz"
    path.write_bytes(gzip.compress(body.encode()))
    assert read_inventory(str(path)) == EXPECTED


def test_parquet_inventory(tmp_path: Path) -> None:
    """Parquet columns by name; keys are not URL-encoded there."""
    table = pa.table(
        {
            "bucket": ["b1", "b1"],
            "key": [f"{U}-ledger-7", "notes/a b.txt"],
            "size": [10, 3],
            "last_modified_date": [datetime(2026, 1, 1, tzinfo=UTC), None],
        }
    )
    path = tmp_path / "inv.parquet"
    pq.write_table(table, path)
    assert read_inventory(str(path)) == EXPECTED


def test_malformed_row_names_file_and_row(tmp_path: Path) -> None:
    """A size that is not a number is CorruptData naming the row."""
    path = tmp_path / "bad.csv"
    path.write_text('"b1","k","ten","2026-01-01T00:00:00Z"\n')
    with pytest.raises(CorruptData, match=r"bad\.csv row 1"):
        read_inventory(str(path))


def test_schema_without_a_key_is_refused() -> None:
    """A fileSchema must name Bucket and Key."""
    with pytest.raises(InvalidArgument):
        parse_schema("Bucket, Size")
