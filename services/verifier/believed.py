"""The believed set: (ledger, tier, owner) identities the marker reported as unlinked.

Durable and shared in the metadata store: each `Believe` call becomes one or more batch
znodes `<root>/b-<sequence>` holding a compact encoding (16 bytes per entry: the ledger id
and a 64-bit digest of the rest of the identity). Every replica loads all batches and watches
the root's children, so all replicas converge on the same set, and a restart reloads it.

The set is bounded by entry count and by age with one deterministic rule that every replica
applies to the same sorted batch list: keep the newest batches while their cumulative size is
within `max_entries` and their znode ctime within `max_age`; everything older is dropped here
and deleted from the store. A miss is never unsafe: it only means the full metadata check.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import hashlib
import secrets
import struct
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

import structlog

from services.core.errors import CorruptData, TombstoneError
from services.verifier.model import Component, OffloadTarget, Target, Tier
from services.verifier.ports import ZnodeStore

_log = structlog.get_logger(__name__)

MAGIC = b"TBB1"
_HEADER = struct.Struct(">4sI")
BATCH_PREFIX = "b-"
_LOAD_CONCURRENCY = 32


def identity_key(target: Target) -> int:
    """`ledger_id << 64 | digest64(tier, component, owner, cursor, schema, offload identity)`.

    Any field that a forged PDLI could change without changing the ledger id changes the
    key, so a belief about ledger X of topic A never vouches for "ledger X of topic B".
    """
    return make_identity_key(
        target.ledger_id,
        target.tier,
        target.component,
        target.ml_name,
        target.cursor,
        target.schema_id,
        target.offload,
    )


def make_identity_key(
    ledger_id: int,
    tier: Tier,
    component: Component,
    ml_name: str | None,
    cursor: str | None,
    schema_id: str | None,
    offload: OffloadTarget | None,
) -> int:
    """`identity_key` from the parts, before a `Target` exists."""
    parts = [tier.value, component.value, ml_name or "", cursor or "", schema_id or ""]
    if offload is not None:
        parts += [offload.uuid, offload.driver_name]
        parts += [f"{k}={v}" for k, v in sorted(offload.driver_metadata.items())]
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return (ledger_id << 64) | int.from_bytes(digest, "big")


def _values(keys: Sequence[int]) -> array.array[int]:
    values = array.array("Q")
    for key in keys:
        values.append(key >> 64)
        values.append(key & 0xFFFFFFFFFFFFFFFF)
    return values


def encode_batch(keys: Sequence[int]) -> bytes:
    """Header (magic, count) then each key as two big-endian uint64 (id, digest)."""
    values = _values(keys)
    if sys.byteorder == "little":
        values.byteswap()
    return _HEADER.pack(MAGIC, len(keys)) + values.tobytes()


def decode_batch(data: bytes, path: str) -> array.array[int]:
    """The flat (id, digest, id, digest...) array of a batch; `CorruptData` if malformed."""
    if len(data) < _HEADER.size:
        raise CorruptData(f"{path}: believed batch truncated")
    magic, count = _HEADER.unpack_from(data)
    if magic != MAGIC or len(data) != _HEADER.size + 16 * count:
        raise CorruptData(f"{path}: not a believed batch (magic {magic!r}, {len(data)} bytes)")
    values = array.array("Q")
    values.frombytes(data[_HEADER.size :])
    if sys.byteorder == "little":
        values.byteswap()
    return values


def _keys(values: array.array[int]) -> list[int]:
    return [(values[i] << 64) | values[i + 1] for i in range(0, len(values), 2)]


@dataclass(frozen=True)
class BelievedConfig:
    """Where the set lives and how big and old it may grow."""

    root: str = "/tombstone/believed"
    """Parent znode of the batch znodes."""
    max_entries: int = 500_000
    """Bound on the entries held (newest batches win)."""
    max_age: timedelta = timedelta(hours=24)
    """Batches older than this are dropped."""
    max_batch_entries: int = 50_000
    """Entries per batch znode (16 bytes each: keeps a znode well under ZooKeeper's 1 MB)."""


@dataclass
class _Batch:
    ctime_ms: int
    values: array.array[int]

    @property
    def size(self) -> int:
        return len(self.values) // 2


class BelievedSet:
    """The in-memory view of the durable set, kept in step by a children watch."""

    def __init__(
        self,
        store: ZnodeStore,
        config: BelievedConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._config = config
        self._clock = clock
        self._batches: dict[str, _Batch] = {}
        self._members: dict[int, int] = {}
        self._size = 0
        self._epoch: int | None = None
        self._refresh_lock = asyncio.Lock()
        self._refreshes_started = 0
        self._refreshes_finished = 0
        self._pending_refresh: asyncio.Task[None] | None = None
        self.loaded = False
        """True once a full load succeeded (before that every lookup is a miss)."""

    def __contains__(self, key: int) -> bool:
        return key in self._members

    def __len__(self) -> int:
        return self._size

    @property
    def batches(self) -> int:
        return len(self._batches)

    async def add(self, keys: Sequence[int]) -> int:
        """Write `keys` durably (one znode per `max_batch_entries`), then hold them here."""
        step = self._config.max_batch_entries
        for start in range(0, len(keys), step):
            chunk = keys[start : start + step]
            now_ms = int(self._clock() * 1000)
            # Time-ordered, unique across replicas; every replica sorts the same names alike.
            name = f"{BATCH_PREFIX}{now_ms:013d}-{secrets.token_hex(6)}"
            await self._store.create(f"{self._config.root}/{name}", encode_batch(chunk))
            if name not in self._batches:
                self._insert(name, _Batch(now_ms, _values(chunk)))
        if keys:
            await self._store.touch(self._config.root)
        await self._apply_bound()
        return len(keys)

    async def refresh(self) -> None:
        """Re-read the batch list, as of no earlier than this call.

        Callers arriving together share one reload: a reload that started after a caller
        asked and has finished answers that caller too (a burst of MISMATCH verdicts costs
        one reload, not one each).
        """
        ticket = self._refreshes_started
        async with self._refresh_lock:
            if self._refreshes_finished > ticket:
                return
            self._refreshes_started += 1
            number = self._refreshes_started
            await self._reload()
            self._refreshes_finished = number

    async def _reload(self) -> None:
        epoch = self._store.epoch()
        await self._store.watch_node(self._config.root, self._on_children)
        names = await self._store.children(self._config.root)
        present = set(names or ())
        for gone in [name for name in self._batches if name not in present]:
            self._remove(gone)
        missing = sorted(
            n for n in present if n.startswith(BATCH_PREFIX) and n not in self._batches
        )
        limit = asyncio.Semaphore(_LOAD_CONCURRENCY)

        async def load(name: str) -> None:
            async with limit:
                await self._load_one(name)

        async with asyncio.TaskGroup() as group:
            for name in missing:
                group.create_task(load(name))
        self._epoch = epoch
        self.loaded = True
        await self._apply_bound()

    async def _load_one(self, name: str) -> None:
        path = f"{self._config.root}/{name}"
        node = await self._store.read(path)
        if node is None or name in self._batches:
            return
        try:
            values = decode_batch(node.data, path)
        except CorruptData:
            # Not ours or damaged: a miss is safe, so skip it rather than stop the service.
            _log.warning("believed_batch_corrupt", path=path)
            return
        self._insert(name, _Batch(node.ctime_ms, values))

    def _insert(self, name: str, batch: _Batch) -> None:
        self._batches[name] = batch
        members = self._members
        for key in _keys(batch.values):
            members[key] = members.get(key, 0) + 1
        self._size += batch.size

    def _remove(self, name: str) -> None:
        batch = self._batches.pop(name)
        members = self._members
        for key in _keys(batch.values):
            left = members[key] - 1
            if left:
                members[key] = left
            else:
                del members[key]
        self._size -= batch.size

    def _over_bound(self) -> list[str]:
        """Names to drop: everything older than the newest batches within both bounds."""
        oldest_ms = (self._clock() - self._config.max_age.total_seconds()) * 1000
        kept = 0
        drop: list[str] = []
        for name in sorted(self._batches, reverse=True):
            batch = self._batches[name]
            if drop or kept + batch.size > self._config.max_entries or batch.ctime_ms < oldest_ms:
                drop.append(name)
            else:
                kept += batch.size
        return drop

    async def _apply_bound(self) -> None:
        drop = self._over_bound()
        for name in drop:
            self._remove(name)
        for name in drop:
            with contextlib.suppress(TombstoneError):
                # Best effort: another replica may have deleted it, or the store is down
                # (then the next refresh drops it again by the same rule).
                await self._store.delete(f"{self._config.root}/{name}")

    def _on_children(self, _path: str) -> None:
        if self._pending_refresh is None or self._pending_refresh.done():
            self._pending_refresh = asyncio.get_running_loop().create_task(self._safe_refresh())

    async def _safe_refresh(self) -> None:
        try:
            await self.refresh()
        except TombstoneError as e:
            _log.warning("believed_refresh_failed", error=str(e))

    async def maintain(
        self,
        interval: timedelta = timedelta(seconds=5),
        resync: timedelta = timedelta(minutes=1),
    ) -> None:
        """Background loop: reload at start, after a reconnection (watches may be lost), after
        a failed load and every `resync` (batches deleted by other replicas); in between,
        re-apply the age bound."""
        last_full = float("-inf")
        while True:
            stale = not self.loaded or self._epoch != self._store.epoch()
            if stale or time.monotonic() - last_full >= resync.total_seconds():
                await self._safe_refresh()
                last_full = time.monotonic()
            else:
                with contextlib.suppress(TombstoneError):
                    await self._apply_bound()
            await asyncio.sleep(interval.total_seconds())

    def close(self) -> None:
        """Cancel a refresh that a watch started (the service is stopping)."""
        if self._pending_refresh is not None:
            self._pending_refresh.cancel()
