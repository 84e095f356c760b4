"""What one extract task reads: a BookKeeper subtree, a namespace's topics and cursors, a
tenant's schema locators, or a bucket (live listing or an inventory file).

Each reader is a coroutine that appends `(table, row)` pairs to `out`, except the BookKeeper
reader, which adds its ledgers to the task's `LedgerColumns`. A znode deleted between
the listing and the read was a successful read of absence and is skipped; any other failure
propagates, and the task that ran the reader reports itself failed. Ledger znodes, the bulk
of a scan, are read `MULTI_READ_CHUNK` at a time with one multiRead each (`get_many`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from services.metadata import (
    MANAGED_LEDGERS_ROOT,
    SCHEMAS_ROOT,
    BookKeeperLedgers,
    CorruptMetadata,
    LedgerPaths,
    MetadataStore,
    NoNode,
    Versioned,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
)
from services.metadata.paths import LedgerLayout, long_hierarchical_path, short_hierarchical_path
from services.metadata.pulsar_names import DOMAINS, PERSISTENT
from services.metadata.zookeeper.store import MULTI_READ_CHUNK
from services.scan.extract import rows as R
from services.scan.extract.inventory import read_inventory
from services.scan.extract.ledger_columns import LedgerColumns
from services.scan.extract.s3 import S3Lister

Out = list[tuple[str, R.Row]]
T = TypeVar("T")


class Truncated(Exception):
    """The task could not list everything it was asked to (its rows are a partial view)."""


@dataclass(frozen=True)
class ReadLimits:
    concurrency: int = 64
    """Requests in flight per task (ZooKeeper reads and listings, or S3 HEADs): each reader
    runs its per-item work sequentially inside one of `concurrency` slots, so this is a hard
    ceiling per task, and a running task holds one ZooKeeper session."""


async def bounded(
    items: Sequence[T], work: Callable[[T], Awaitable[None]], concurrency: int
) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(item: T) -> None:
        async with slots:
            await work(item)

    await asyncio.gather(*(one(item) for item in items))


async def _get(store: MetadataStore, path: str) -> Versioned | None:
    try:
        return await store.get(path)
    except NoNode:
        return None


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return sorted(await store.get_children(path))
    except NoNode:
        return []


def multi_reads_in_flight(limits: ReadLimits) -> int:
    """multiRead requests a task keeps in flight: one per 16 of its `concurrency` slots, at
    least one. A multiRead carries up to MULTI_READ_CHUNK reads, so `concurrency` of them
    would put 256 times the reads on the ensemble that the bound documents; 4 (the default)
    keep 1,024 znodes in flight per task, about what 64 single gets keep busy."""
    return max(1, limits.concurrency // 16)


async def read_bk_subtree(
    store: MetadataStore,
    paths: LedgerPaths,
    subtree: str,
    ledgers: LedgerColumns,
    limits: ReadLimits,
) -> int:
    """Every ledger znode below `subtree` (relative to the root), added to `ledgers`;
    returns the row count."""
    listing = BookKeeperLedgers(store, paths=paths, list_concurrency=limits.concurrency)
    ids = await listing.ledger_ids_under(subtree)
    before = len(ledgers)
    add = ledgers.add

    async def read(batch: Sequence[int]) -> None:
        found = [(i, _path_in(paths, subtree, i)) for i in batch]
        results = await store.get_many([path for _, path in found])
        for (ledger_id, path), node in zip(found, results, strict=True):
            if isinstance(node, Versioned):
                add(ledger_id, path, node)
            elif node is not None:  # unknown, never absent: the task fails
                raise node

    batches = [ids[i : i + MULTI_READ_CHUNK] for i in range(0, len(ids), MULTI_READ_CHUNK)]
    await bounded(batches, read, multi_reads_in_flight(limits))
    return len(ledgers) - before


def _path_in(paths: LedgerPaths, subtree: str, ledger_id: int) -> str:
    """The path of a ledger found in `subtree`: its tree says which split was used (a 3-digit
    tree holds long paths even for small ids, when BookKeeper's long manager wrote them)."""
    if paths.layout is LedgerLayout.FLAT:
        return paths.ledger_path(ledger_id)
    top = subtree.split("/", 1)[0]
    split = short_hierarchical_path if len(top) == 2 else long_hierarchical_path
    return f"{paths.root}/{split(ledger_id)}"


async def namespaces_under(store: MetadataStore, unit: str) -> list[str]:
    """ML-name prefixes holding topics below `tenant/x`: `tenant/ns` (V2) and, when `x` is a
    cluster, `tenant/x/ns` (V1)."""
    base = f"{MANAGED_LEDGERS_ROOT}/{unit}"
    children = await _children(store, base)
    found = [unit] if PERSISTENT in children else []
    for child in children:
        if child in DOMAINS:
            continue
        if PERSISTENT in await _children(store, f"{base}/{child}"):
            found.append(f"{unit}/{child}")
    return found


async def read_managed_ledgers(
    store: MetadataStore, unit: str, out: Out, limits: ReadLimits
) -> tuple[int, int]:
    """Every ML znode (with its list) and cursor znode below `tenant/x`; (MLs, cursors) read."""
    names: list[str] = []
    for prefix in await namespaces_under(store, unit):
        topics = await _children(store, f"{MANAGED_LEDGERS_ROOT}/{prefix}/{PERSISTENT}")
        names.extend(f"{prefix}/{PERSISTENT}/{topic}" for topic in topics)
    counts = [0, 0]

    async def read(ml_name: str) -> None:
        path = f"{MANAGED_LEDGERS_ROOT}/{ml_name}"
        node = await _get(store, path)
        if node is None:
            return
        counts[0] += 1
        _append_ml(ml_name, path, node, out)
        cursors = await _children(store, path)
        for cursor in cursors:
            counts[1] += await _read_cursor(store, ml_name, cursor, out)

    await bounded(names, read, limits.concurrency)
    return counts[0], counts[1]


D = TypeVar("D")


def _decoded(
    table: str, decode: Callable[[], D], row: Callable[[D | None], R.Row], out: Out
) -> D | None:
    """Append `table`'s row for a decoded znode, or, when it does not decode, the row without
    its contents and the problem in `decode_error` (the analysis treats it as unknown)."""
    try:
        value = decode()
    except CorruptMetadata as e:
        bad = row(None)
        bad["decode_error"] = e.problem
        out.append((table, bad))
        return None
    out.append((table, row(value)))
    return value


def _append_ml(ml_name: str, path: str, node: Versioned, out: Out) -> None:
    info = _decoded(
        "managed_ledgers",
        lambda: decode_managed_ledger_info(node.data, path=path),
        lambda i: R.managed_ledger_row(ml_name, node, i),
        out,
    )
    if info is not None:
        out.extend(("ml_ledgers", row) for row in R.ml_ledger_rows(ml_name, info))


async def _read_cursor(store: MetadataStore, ml_name: str, cursor: str, out: Out) -> int:
    path = f"{MANAGED_LEDGERS_ROOT}/{ml_name}/{cursor}"
    node = await _get(store, path)
    if node is None:
        return 0
    _decoded(
        "cursors",
        lambda: decode_cursor_info(node.data, path=path),
        lambda info: R.cursor_row(ml_name, cursor, node, info),
        out,
    )
    return 1


async def read_schemas(store: MetadataStore, tenant: str, out: Out, limits: ReadLimits) -> int:
    """Every schema locator below `/schemas/<tenant>` (V2 `t/ns/x` and V1 `t/c/ns/x`)."""
    ids: list[str] = []
    for ns in await _children(store, f"{SCHEMAS_ROOT}/{tenant}"):
        ids.extend(
            f"{tenant}/{ns}/{topic}"
            for topic in await _children(store, f"{SCHEMAS_ROOT}/{tenant}/{ns}")
        )
    before = len(out)

    async def read(schema_id: str, depth: int = 3) -> None:
        path = f"{SCHEMAS_ROOT}/{schema_id}"
        node = await _get(store, path)
        if node is None:
            return
        if not node.data and depth == 3:
            nested = await _children(store, path)
            if nested:  # a V1 namespace directory: tenant/cluster/ns/<topic> below it
                # One after the other, inside this read's slot: a task never has more than
                # `concurrency` requests in flight (the per-executor ZooKeeper bound).
                for n in nested:
                    await read(f"{schema_id}/{n}", 4)
                return
        _decoded(
            "schemas",
            lambda: decode_schema_locator(node.data, path=path),
            lambda locator: R.schema_row(schema_id, node, locator),
            out,
        )

    await bounded(ids, read, limits.concurrency)
    return len(out) - before


async def read_bucket(
    lister: S3Lister, bucket: str, out: Out, limits: ReadLimits, *, head: bool
) -> int:
    """Every object of `bucket` (live listing); user metadata by HEAD of Pulsar-named keys."""
    page = await lister.list_all(bucket)
    listed = [(bucket, o.key, o.size, o.last_modified_ms) for o in page.objects]
    count = await _object_rows(lister, listed, out, limits, head=head)
    if page.truncated:
        raise Truncated(f"s3://{bucket}: listing ended early ({count} objects read)")
    return count


async def read_inventory_file(
    lister: S3Lister | None,
    path: str,
    buckets: frozenset[str],
    schema: Sequence[str],
    out: Out,
    limits: ReadLimits,
) -> int:
    """The objects an inventory file lists in the allowed buckets (others are ignored)."""
    rows = await asyncio.to_thread(read_inventory, path, schema)
    listed = [(r.bucket, r.key, r.size, r.last_modified_ms) for r in rows if r.bucket in buckets]
    return await _object_rows(lister, listed, out, limits, head=lister is not None)


async def _object_rows(
    lister: S3Lister | None,
    listed: list[tuple[str, str, int, int | None]],
    out: Out,
    limits: ReadLimits,
    *,
    head: bool,
) -> int:
    before = len(out)

    async def one(item: tuple[str, str, int, int | None]) -> None:
        bucket, key, size, modified = item
        metadata: dict[str, str] | None = None
        row = R.object_row(bucket, key, size, modified, None)
        if head and lister is not None and row.get("ledger_id") is not None:
            metadata = await lister.user_metadata(bucket, key)
            if metadata is None:
                return  # deleted since the listing
        out.append(("offload_objects", R.object_row(bucket, key, size, modified, metadata)))

    await bounded(listed, one, limits.concurrency)
    return len(out) - before
