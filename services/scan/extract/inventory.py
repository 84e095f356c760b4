"""S3 Inventory files as the object listing of a bucket (CSV, gzipped CSV or Parquet).

S3 Inventory writes CSV without a header, in the column order its manifest's `fileSchema`
names (`Bucket, Key, Size, LastModifiedDate, ...`), with URL-encoded keys; Parquet files name
their columns (`bucket`, `key`, `size`, `last_modified_date`). A CSV whose first row is a
header is read by that header instead. Only the four columns below are used.
"""

from __future__ import annotations

import csv
import gzip
import io
import urllib.parse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from services.core.errors import CorruptData, InvalidArgument

DEFAULT_CSV_SCHEMA = ("bucket", "key", "size", "last_modified_date")
_ALIASES = {"lastmodifieddate": "last_modified_date", "last_modified": "last_modified_date"}


@dataclass(frozen=True)
class InventoryRow:
    bucket: str
    key: str
    size: int
    last_modified_ms: int | None
    """None when the file has no date: an unknown age counts as young."""


def _normalise(name: str) -> str:
    plain = name.strip().lower()
    return _ALIASES.get(plain.replace("_", ""), _ALIASES.get(plain, plain))


def parse_schema(text: str) -> tuple[str, ...]:
    """`"Bucket, Key, Size, LastModifiedDate"` (a manifest's fileSchema) → column names."""
    names = tuple(_normalise(part) for part in text.split(",") if part.strip())
    missing = {"bucket", "key"} - set(names)
    if missing:
        raise InvalidArgument("inventory_schema", f"needs columns {sorted(missing)}")
    return names


def parse_time_ms(value: Any) -> int:
    """An inventory LastModifiedDate (ISO 8601 text or a datetime) in ms since the epoch."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return int(moment.timestamp() * 1000)
    text = str(value).strip().replace("Z", "+00:00")
    moment = datetime.fromisoformat(text)
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


def read_inventory(path: str, schema: Sequence[str] = DEFAULT_CSV_SCHEMA) -> list[InventoryRow]:
    """Every row of one inventory file; `CorruptData` naming the file and row when malformed."""
    if path.endswith(".parquet"):
        return list(_parquet_rows(path))
    return list(_csv_rows(path, tuple(schema)))


def _csv_rows(path: str, schema: tuple[str, ...]) -> Iterator[InventoryRow]:
    raw = Path(path).read_bytes()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    reader = csv.reader(io.StringIO(raw.decode("utf-8")))
    columns = schema
    for number, record in enumerate(reader, start=1):
        if not record:
            continue
        if number == 1 and {"bucket", "key"} <= {_normalise(name) for name in record}:
            columns = tuple(_normalise(name) for name in record)
            continue
        yield _row(dict(zip(columns, record, strict=False)), path, number, encoded=True)


def _parquet_rows(path: str) -> Iterator[InventoryRow]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    names = [_normalise(name) for name in table.column_names]
    for number, record in enumerate(table.to_pylist(), start=1):
        values = dict(zip(names, record.values(), strict=True))
        yield _row(values, path, number, encoded=False)


def _row(values: dict[str, Any], path: str, number: int, *, encoded: bool) -> InventoryRow:
    try:
        key = str(values["key"])
        return InventoryRow(
            bucket=str(values["bucket"]),
            key=urllib.parse.unquote(key) if encoded else key,
            size=int(values.get("size") or 0),
            last_modified_ms=parse_time_ms(values["last_modified_date"])
            if values.get("last_modified_date") not in (None, "")
            else None,
        )
    except (KeyError, ValueError, TypeError) as e:
        raise CorruptData(f"inventory {path} row {number}: {type(e).__name__}: {e}") from e
