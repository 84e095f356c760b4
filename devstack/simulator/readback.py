"""Read a cluster back from ZooKeeper and S3 into model-shaped records, for comparison.

`expected(model)` gives what `read_cluster` must return for a model written by the writer;
tests compare the two with `==`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from devstack.simulator import znodes
from devstack.simulator.model import ClusterModel, Cursor, Ledger, ManagedLedger, Schema
from devstack.simulator.s3 import ObjectStore
from services.metadata import (
    BookKeeperLedgers,
    LedgerMetadata,
    LedgerPaths,
    ManagedLedgers,
    MetadataStore,
    NoNode,
    Schemas,
    java_url_decode,
    topic_from_managed_ledger_name,
)
from services.metadata.paths import HYBRID_LONG_THRESHOLD, LedgerLayout
from services.metadata.pulsar_names import PARTITIONED_TOPICS_ROOT

T = TypeVar("T")
DEFAULT_CONCURRENCY = 64


@dataclass
class ReadBack:
    """What is in the stores, in the model's shapes."""

    ledgers: dict[int, LedgerMetadata] = field(default_factory=dict)
    ledger_layouts: dict[int, LedgerLayout] = field(default_factory=dict)
    """The layout whose path each ledger znode was found at."""
    managed_ledgers: dict[str, ManagedLedger] = field(default_factory=dict)
    cursors: dict[tuple[str, str], Cursor] = field(default_factory=dict)
    schemas: dict[str, Schema] = field(default_factory=dict)
    partitioned_topics: dict[str, int] = field(default_factory=dict)
    """Base topic name → partition count."""
    objects: dict[str, dict[str, str]] = field(default_factory=dict)
    """Object key → user metadata (keys lowercased, as S3 returns them)."""


def expected(model: ClusterModel) -> ReadBack:
    """What `read_cluster` returns for a freshly written `model`."""
    return ReadBack(
        ledgers={led.ledger_id: led.metadata for led in model.bookkeeper_ledgers()},
        ledger_layouts={led.ledger_id: _found_as(led) for led in model.bookkeeper_ledgers()},
        managed_ledgers=dict(model.managed_ledgers),
        cursors=dict(model.cursors),
        schemas=dict(model.schemas),
        partitioned_topics={p.topic: p.partitions for p in model.partitioned_topics.values()},
        objects={
            key: {k.lower(): v for k, v in obj.user_metadata.items()}
            for key, obj in model.objects.items()
        },
    )


async def read_cluster(
    store: MetadataStore,
    *,
    ledgers_root: str = "/ledgers",
    s3_client: ObjectStore | None = None,
    buckets: tuple[str, ...] = (),
    concurrency: int = DEFAULT_CONCURRENCY,
) -> ReadBack:
    slots = asyncio.Semaphore(concurrency)
    out = ReadBack()
    out.ledgers, out.ledger_layouts = await read_ledgers(store, ledgers_root, slots)
    out.managed_ledgers, out.cursors = await read_managed_ledgers(store, slots)
    out.schemas = await read_schemas(store, slots)
    out.partitioned_topics = await read_partitioned(store, slots)
    if s3_client is not None:
        for bucket in buckets:
            out.objects.update(await read_objects(s3_client, bucket, slots))
    return out


async def _gather(
    slots: asyncio.Semaphore, items: list[T], fn: Callable[[T], Awaitable[None]]
) -> None:
    async def one(item: T) -> None:
        async with slots:
            await fn(item)

    await asyncio.gather(*(one(item) for item in items))


def _found_as(ledger: Ledger) -> LedgerLayout:
    """Where `read_ledgers` finds a ledger: above Integer.MAX_VALUE the hybrid and the long
    paths are the same path, reported as hybrid."""
    layout = ledger.path_layout
    if layout is LedgerLayout.LONG_HIERARCHICAL and ledger.ledger_id >= HYBRID_LONG_THRESHOLD:
        return LedgerLayout.HIERARCHICAL
    return layout


async def read_ledgers(
    store: MetadataStore, root: str, slots: asyncio.Semaphore
) -> tuple[dict[int, LedgerMetadata], dict[int, LedgerLayout]]:
    """Every ledger znode under `root` at any path the layouts in play give it (hybrid, long
    and flat), whatever LAYOUT says; with the layout whose path it was found at."""
    managers = {
        layout: BookKeeperLedgers(store, paths=LedgerPaths(root=root, layout=layout))
        for layout in (LedgerLayout.HIERARCHICAL, LedgerLayout.LONG_HIERARCHICAL)
    }
    flat = BookKeeperLedgers(store, paths=LedgerPaths(root=root, layout=LedgerLayout.FLAT))
    # The hybrid walk visits both 2-digit (short) and 3-digit (long) trees.
    hybrid = managers[LedgerLayout.HIERARCHICAL]
    tree_ids = [ledger_id async for ledger_id in hybrid.iter_ledger_ids()]
    found: dict[int, LedgerMetadata] = {}
    layouts: dict[int, LedgerLayout] = {}

    async def read_tree(ledger_id: int) -> None:
        for layout, manager in managers.items():
            with contextlib.suppress(NoNode):
                found[ledger_id] = (await manager.read(ledger_id)).metadata
                layouts[ledger_id] = layout
                return

    async def read_flat(ledger_id: int) -> None:
        found[ledger_id] = (await flat.read(ledger_id)).metadata
        layouts[ledger_id] = LedgerLayout.FLAT

    await _gather(slots, tree_ids, read_tree)
    await _gather(slots, [i async for i in flat.iter_ledger_ids()], read_flat)
    return dict(sorted(found.items())), dict(sorted(layouts.items()))


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return sorted(await store.get_children(path))
    except NoNode:
        return []


async def _paths_at_depth(store: MetadataStore, root: str, depth: int) -> list[str]:
    """Paths exactly `depth` levels below `root`."""
    level = [root]
    for _ in range(depth):
        lists = await asyncio.gather(*(_children(store, p) for p in level))
        level = [f"{p}/{c}" for p, names in zip(level, lists, strict=True) for c in names]
    return level


async def read_managed_ledgers(
    store: MetadataStore, slots: asyncio.Semaphore
) -> tuple[dict[str, ManagedLedger], dict[tuple[str, str], Cursor]]:
    """Every ML and its cursors, through the metadata layer's `ManagedLedgers` store."""
    mls = ManagedLedgers(store)
    found: dict[str, ManagedLedger] = {}
    cursors: dict[tuple[str, str], Cursor] = {}

    async def read(name: str) -> None:
        info = (await mls.read(name)).value
        topic = str(topic_from_managed_ledger_name(name))
        # A 0-byte znode and an empty ManagedLedgerInfo are the same bytes.
        empty = not info.ByteSize()
        found[name] = znodes.ml_from_proto(name, topic, info, empty=empty, bucket="")
        for cursor in await mls.cursors(name):
            decoded = (await mls.read_cursor(name, cursor)).value
            cursors[(name, cursor)] = znodes.cursor_from_proto(name, cursor, decoded)

    await _gather(slots, [name async for name in mls.managed_ledger_names()], read)
    return found, cursors


async def read_schemas(store: MetadataStore, slots: asyncio.Semaphore) -> dict[str, Schema]:
    schemas = Schemas(store)
    found: dict[str, Schema] = {}

    async def read(schema_id: str) -> None:
        locator = (await schemas.read(schema_id)).value
        found[schema_id] = znodes.schema_from_proto(schema_id, locator)

    await _gather(slots, [schema_id async for schema_id in schemas.schema_ids()], read)
    return found


async def read_partitioned(store: MetadataStore, slots: asyncio.Semaphore) -> dict[str, int]:
    found: dict[str, int] = {}
    paths = await _paths_at_depth(store, PARTITIONED_TOPICS_ROOT, 4)

    async def read(path: str) -> None:
        tenant, namespace, domain, encoded = path[len(PARTITIONED_TOPICS_ROOT) + 1 :].split("/")
        topic = f"{domain}://{tenant}/{namespace}/{java_url_decode(encoded)}"
        found[topic] = znodes.partitions_from_znode((await store.get(path)).data)

    await _gather(slots, paths, read)
    return found


async def read_objects(
    s3: ObjectStore, bucket: str, slots: asyncio.Semaphore
) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}

    async def read(key: str) -> None:
        found[key] = await s3.head_metadata(bucket=bucket, key=key)

    await _gather(slots, await s3.list_keys(bucket=bucket), read)
    return found
