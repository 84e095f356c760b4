"""Reference owners (ML lists, cursor znodes, schema locators) read through a watched cache.

A verdict reads its owner here; the entry stays valid until ZooKeeper says the znode changed,
so a steady stream of verdicts for one topic costs one owner read, not one per verdict.

Never a stale "not in use":
- only successful reads are cached, never absence (an absent owner is read again each time);
- each entry is stored only if no change event for its path arrived while it was being read;
- the whole cache is dropped when the store's epoch changes (a reconnection or an expired
  session may have lost watches), so nothing read before can be served after;
- ZooKeeper delivers a change event before the answer to any later read on the same session,
  and the verdict reads the ledger znode *before* it looks here (yielding once to the loop
  so that the event's callbacks run first), so a cached owner is at least as new as that
  read.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from services.metadata.cursor_properties import persisted_compacted_ledger, property_ledger_ids
from services.metadata.offload import offload_uuid
from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
)
from services.verifier.model import Component
from services.verifier.ports import Znode, ZnodeStore


@dataclass(frozen=True, slots=True)
class OffloadRef:
    """How a listed ledger's offload context references its offloaded copy."""

    uuid: str | None
    complete: bool
    bookkeeper_deleted: bool


@dataclass(frozen=True, slots=True)
class Owner:
    """What an owner znode references. `exists=False` is a successful read of absence."""

    path: str
    exists: bool
    version: int = -1
    refs: Mapping[int, OffloadRef | None] = field(default_factory=dict)
    """Referenced ledger ids; for an ML, each with its offload context (None if none)."""
    shadow_source: str | None = None
    """For a shadow ML: the source topic named by its `PULSAR.SHADOW_SOURCE` property."""
    mtime_ms: int = 0
    """When the owner znode was last written (server clock); 0 when absent or unknown."""
    property_refs: frozenset[int] = frozenset()
    """A cursor znode: the ledger ids its properties name (`metadata.cursor_properties`)."""
    cursor_active: bool = False
    """A cursor znode with a cursor ledger: its mark-delete properties are in that ledger."""
    compacted_ledger: int | None = None
    """A cursor znode: the `CompactedTopicLedger` value it holds (None: it holds none)."""

    def references(self, ledger_id: int) -> bool:
        """Whether the owner, as read, names `ledger_id` anywhere (list, id field, property)."""
        return self.exists and (ledger_id in self.refs or ledger_id in self.property_refs)

    def compaction_unknown(self, ledger_id: int) -> bool:
        """A `__compaction` cursor whose live `CompactedTopicLedger` may be `ledger_id`: it is
        active (the live value is in its cursor ledger) and the value it persisted is not above
        the ledger. Only a persisted value above it proves the ledger unreferenced: each
        compaction writes a newer ledger and mark-delete never moves back."""
        if not self.exists or not self.cursor_active:
            return False
        return self.compacted_ledger is None or ledger_id >= self.compacted_ledger


Decoder = Callable[[str, Znode], Owner]


def decode_ml(path: str, node: Znode) -> Owner:
    info = decode_managed_ledger_info(node.data, path=path)
    refs: dict[int, OffloadRef | None] = {}
    for ledger in info.ledgerInfo:
        ref = None
        if ledger.HasField("offloadContext"):
            ctx = ledger.offloadContext
            ref = OffloadRef(offload_uuid(ctx), ctx.complete, ctx.bookkeeperDeleted)
        refs[ledger.ledgerId] = ref
    shadow = next((p.value for p in info.properties if p.key == SHADOW_SOURCE), None)
    return Owner(path, True, node.version, refs, shadow, node.mtime_ms)


def decode_cursor(path: str, node: Znode) -> Owner:
    """Every reference a cursor znode holds: one decoder for every kind it owns, since the
    cache keeps one entry per path whichever kind of PDLI read it."""
    info = decode_cursor_info(node.data, path=path)
    refs: dict[int, OffloadRef | None] = {}
    if info.cursorsLedgerId >= 0:
        refs[info.cursorsLedgerId] = None
    return Owner(
        path,
        True,
        node.version,
        refs,
        mtime_ms=node.mtime_ms,
        property_refs=property_ledger_ids(info),
        cursor_active=info.cursorsLedgerId >= 0,
        compacted_ledger=persisted_compacted_ledger(info),
    )


def decode_schema(path: str, node: Znode) -> Owner:
    locator = decode_schema_locator(node.data, path=path)
    refs: dict[int, OffloadRef | None] = {entry.position.ledgerId: None for entry in locator.index}
    refs[locator.info.position.ledgerId] = None
    return Owner(path, True, node.version, refs, mtime_ms=node.mtime_ms)


DECODERS: Mapping[Component, Decoder] = {
    Component.MANAGED_LEDGER: decode_ml,
    Component.CURSOR: decode_cursor,
    Component.SCHEMA: decode_schema,
    Component.COMPACTED: decode_cursor,
    Component.BUCKET: decode_cursor,
}


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    reads: int = 0
    invalidations: int = 0


class OwnerCache:
    """A bounded LRU of decoded owners, each entry guarded by a one-shot ZooKeeper watch."""

    def __init__(self, store: ZnodeStore, *, max_entries: int = 100_000) -> None:
        self._store = store
        self._max = max_entries
        self._entries: OrderedDict[str, Owner] = OrderedDict()
        self._epoch = store.epoch()
        self._inflight: dict[str, int] = {}
        self._changed: dict[str, int] = {}
        self._loading: dict[str, asyncio.Event] = {}
        self.stats = CacheStats()
        self.on_read: Callable[[str, bool], None] = lambda path, hit: None
        """Hook for metrics: called with (path, cache_hit) for every lookup."""

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, path: str, decode: Decoder, *, yielded: bool = False) -> Owner:
        """The owner at `path`: from the cache when its watch still holds, else read.

        `yielded`: the caller has already given the loop a turn since its last read resumed
        it (a batch yields once for all its PDLIs), so the yield before trusting a cached
        entry is not needed again."""
        loading = self._loading.get(path)
        if loading is not None and path not in self._entries:
            # Join the read already in flight (a batch of PDLIs of one topic arrives together)
            # and then look again: its result is used only if it was clean enough to be
            # cached, and it is then trusted exactly like any other cached entry.
            await loading.wait()
            yielded = False
        entry = await self._lookup(path, yielded)
        if entry is not None:
            return entry
        self.stats.misses += 1
        self.on_read(path, False)
        return await self._load(path, decode)

    async def _lookup(self, path: str, yielded: bool) -> Owner | None:
        if path in self._entries and not yielded:
            # A change notification that arrived together with the caller's last read (the
            # ledger znode) reaches `_on_change` two loop callbacks later (aiozk's callback,
            # then the watch future's), while the caller resumed after one: yield once so it
            # runs before the entry is trusted.
            await asyncio.sleep(0)
        self._check_epoch()
        entry = self._entries.get(path)
        if entry is not None:
            self._entries.move_to_end(path)
            self.stats.hits += 1
            self.on_read(path, True)
        return entry

    async def _load(self, path: str, decode: Decoder) -> Owner:
        epoch = self._epoch
        self._inflight[path] = self._inflight.get(path, 0) + 1
        changes_before = self._changed.get(path, 0)
        done = self._loading.get(path)
        if done is None:
            done = self._loading[path] = asyncio.Event()
        try:
            self.stats.reads += 1
            node = await self._store.read(path, watch=self._on_change)
            changed = self._changed.get(path, 0) != changes_before
        finally:
            self._release(path)
            if self._loading.get(path) is done and path not in self._inflight:
                del self._loading[path]
            done.set()
        if node is None:
            return Owner(path, False)
        owner = decode(path, node)
        self._check_epoch()
        if not changed and epoch == self._epoch:
            self._store_entry(path, owner)
        return owner

    def _release(self, path: str) -> None:
        left = self._inflight[path] - 1
        if left:
            self._inflight[path] = left
        else:
            del self._inflight[path]
            self._changed.pop(path, None)

    def _store_entry(self, path: str, owner: Owner) -> None:
        self._entries[path] = owner
        self._entries.move_to_end(path)
        while len(self._entries) > self._max:
            evicted, _ = self._entries.popitem(last=False)
            self._store.unwatch(evicted, self._on_change)

    def _on_change(self, path: str) -> None:
        self.stats.invalidations += 1
        self._entries.pop(path, None)
        if path in self._inflight:
            self._changed[path] = self._changed.get(path, 0) + 1

    def _check_epoch(self) -> None:
        epoch = self._store.epoch()
        if epoch != self._epoch:
            self._entries.clear()
            self._epoch = epoch

    def invalidate_all(self) -> None:
        """Forget everything (tests and operators)."""
        self._entries.clear()
