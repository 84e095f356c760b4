"""A full read of every owner: the managed ledgers with their cursors, and the schema
locators, encoded into index entries as they arrive.

Listings walk the tree as Pulsar lays it out (the reconciler's extract reads the same
shapes: `services.scan.extract.tasks`); znodes are read with `get_many` (multiRead, many per
round trip). A znode deleted between its listing and its read was a successful read of
absence. Any other failure fails the whole read (`StoreUnavailable`...): a partial read
must never be diffed, since what it missed would look deleted.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from services.marker.follower.index import Drivers, encode
from services.marker.follower.owner_paths import Kind, classify
from services.metadata import (
    MANAGED_LEDGERS_ROOT,
    SCHEMAS_ROOT,
    CorruptMetadata,
    MetadataError,
    MetadataStore,
    NoNode,
    Versioned,
)
from services.metadata.pulsar_names import DOMAINS, PERSISTENT

CONCURRENCY = 32
"""Listings in flight during a full read."""
READ_BATCH = 1024
"""Owner znodes per `get_many` call (split into multiRead chunks by the store)."""


@dataclass
class FullRead:
    """Every owner's entry, and the owners whose znode exists but did not decode (what they
    reference is unknown: the index keeps what it knew of them)."""

    entries: dict[str, array[int]] = field(default_factory=dict)
    unreadable: set[str] = field(default_factory=set)
    znodes: int = 0


async def read_everything(store: MetadataStore, drivers: Drivers) -> FullRead:
    out = FullRead()
    slots = asyncio.Semaphore(CONCURRENCY)
    mls = await _ml_paths(store, slots)
    await read_owners(store, mls, drivers, out)
    cursors: list[str] = []
    for ml, children in zip(
        mls, await _each(mls, lambda p: _children(store, p, slots)), strict=True
    ):
        if ml in out.entries:
            cursors.extend(f"{ml}/{child}" for child in children)
    await read_owners(store, cursors, drivers, out)
    await read_owners(store, await _schema_paths(store, slots), drivers, out)
    return out


async def read_owners(
    store: MetadataStore, paths: Sequence[str], drivers: Drivers, out: FullRead
) -> None:
    """Read and encode `paths` (owner znodes) into `out`; absent ones are left out."""
    for start in range(0, len(paths), READ_BATCH):
        chunk = paths[start : start + READ_BATCH]
        for path, result in zip(chunk, await store.get_many(chunk), strict=True):
            if isinstance(result, MetadataError):
                raise result
            if result is not None:
                out.znodes += 1
                place(path, result, drivers, out)


def place(path: str, node: Versioned, drivers: Drivers, out: FullRead) -> None:
    owner = classify(path)
    if owner is None or not is_owner_data(owner.kind, node):
        return
    try:
        out.entries[path] = encode(owner.kind, node, path, drivers)
    except CorruptMetadata:
        out.unreadable.add(path)


def is_owner_data(kind: Kind, node: Versioned) -> bool:
    """False for a V1 namespace folder below `/schemas` (three segments, like a V2 topic's
    locator, but empty): it holds locators and is none."""
    return kind is not Kind.SCHEMA or bool(node.data)


async def _children(store: MetadataStore, path: str, slots: asyncio.Semaphore) -> list[str]:
    async with slots:
        try:
            return sorted(await store.get_children(path))
        except NoNode:
            return []


async def _each(
    paths: Sequence[str], list_one: Callable[[str], Awaitable[list[str]]]
) -> list[list[str]]:
    return list(await asyncio.gather(*(list_one(path) for path in paths)))


async def _ml_paths(store: MetadataStore, slots: asyncio.Semaphore) -> list[str]:
    """`<root>/<t>/<ns>/persistent/<topic>` and the V1 `<root>/<t>/<c>/<ns>/persistent/...`."""
    root = MANAGED_LEDGERS_ROOT
    tenants = [f"{root}/{t}" for t in await _children(store, root, slots)]
    level1 = [
        f"{t}/{c}"
        for t, cs in zip(
            tenants, await _each(tenants, lambda p: _children(store, p, slots)), strict=True
        )
        for c in cs
    ]
    found: list[str] = []
    deeper: list[str] = []
    for path, children in zip(
        level1, await _each(level1, lambda p: _children(store, p, slots)), strict=True
    ):
        if PERSISTENT in children:
            found.append(f"{path}/{PERSISTENT}")
        deeper.extend(f"{path}/{c}" for c in children if c not in DOMAINS)
    for path, children in zip(
        deeper, await _each(deeper, lambda p: _children(store, p, slots)), strict=True
    ):
        if PERSISTENT in children:
            found.append(f"{path}/{PERSISTENT}")
    topics = await _each(found, lambda p: _children(store, p, slots))
    return [f"{d}/{t}" for d, ts in zip(found, topics, strict=True) for t in ts]


async def _schema_paths(store: MetadataStore, slots: asyncio.Semaphore) -> list[str]:
    """`/schemas/<t>/<ns>/<topic>`, and one level deeper for V1 (`<t>/<c>/<ns>/<topic>`):
    a V2 topic's locator has no children, so children below level 3 are V1 topics."""
    root = SCHEMAS_ROOT
    tenants = [f"{root}/{t}" for t in await _children(store, root, slots)]
    spaces = [
        f"{t}/{n}"
        for t, ns in zip(
            tenants, await _each(tenants, lambda p: _children(store, p, slots)), strict=True
        )
        for n in ns
    ]
    level3 = [
        f"{s}/{x}"
        for s, xs in zip(
            spaces, await _each(spaces, lambda p: _children(store, p, slots)), strict=True
        )
        for x in xs
    ]
    level4 = await _each(level3, lambda p: _children(store, p, slots))
    return level3 + [f"{p}/{x}" for p, xs in zip(level3, level4, strict=True) for x in xs]
