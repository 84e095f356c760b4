"""Reads of one shard: get by key comparison or secondary index, list and range scan."""

from __future__ import annotations

from .shard import Shard
from .storage import Record

#: A found record: (primary key, record, the secondary key it was found by, if any).
Found = tuple[str, Record, str | None]


def get(shard: Shard, key: str, comparison: str, index: str | None) -> Found | None:
    if index is not None:
        return _get_indexed(shard, key, comparison, index)
    records = shard.records
    if comparison == "EQUAL":
        record = records.get(key)
        return (key, record, None) if record else None
    if comparison in ("FLOOR", "LOWER"):
        hit = records.floor(key, inclusive=comparison == "FLOOR")
    else:
        hit = records.ceiling(key, inclusive=comparison == "CEILING")
    return (hit[0], hit[1], None) if hit else None


def _get_indexed(shard: Shard, secondary: str, comparison: str, name: str) -> Found | None:
    index = shard.indexes.get(name)
    if index is None:
        return None
    if comparison == "EQUAL":
        hit = index.first_at_or_above(secondary, inclusive=True)
        if hit is not None and hit[0] != secondary:
            hit = None
    elif comparison in ("FLOOR", "LOWER"):
        hit = index.last_at_or_below(secondary, inclusive=comparison == "FLOOR")
    else:
        hit = index.first_at_or_above(secondary, inclusive=comparison == "CEILING")
    if hit is None:
        return None
    record = shard.records.get(hit[1])
    return (hit[1], record, hit[0]) if record else None


def scan(shard: Shard, start: str, end: str, index: str | None) -> list[Found]:
    """Records in [start, end) by key, or by secondary key when `index` is named."""
    if index is None:
        return [(key, record, None) for key, record in shard.records.range(start, end)]
    entries = shard.indexes[index].range(start, end) if index in shard.indexes else []
    found: list[Found] = []
    for secondary, primary in entries:
        record = shard.records.get(primary)
        if record is not None:
            found.append((primary, record, secondary))
    return found
