"""Parquet that Spark wrote, read on the driver with pyarrow: a footer, a row count or the
rows of a small table, each without a Spark job (a job costs more than these reads).

pyarrow is imported on first use: the reconciler's CLI and the services that only import
its names do not pay for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _parts(table: Path) -> list[Path]:
    """The data files of a flat table directory, in name order (Spark's `part-NNNNN-...`).
    A table partitioned into `column=value/` folders (the findings) has none at its top:
    it is read with Spark or `pyarrow.parquet.read_table`, not with these helpers."""
    return sorted(Path(table).glob("part-*"))


def rows(table: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row of a small table (or of `columns` only), as dicts."""
    import pyarrow.parquet as pq

    return list(pq.read_table(table, columns=columns).to_pylist())


def row_count(table: Path) -> int:
    """How many rows a table holds, from its files' footers, whatever its size."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(part).metadata.num_rows for part in _parts(table))


def first_footer(table: Path) -> dict[bytes, bytes] | None:
    """The key-value metadata in the footer of a table's first file; None without a file."""
    import pyarrow.parquet as pq

    parts = _parts(table)
    return pq.read_schema(parts[0]).metadata if parts else None
