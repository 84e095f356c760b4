"""One replica of the believed set: group-committed writes, bounds, and the incremental
follower of what other replicas write (the package's docstring has the whole design)."""

from __future__ import annotations

import array
import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import structlog

from services.core.errors import CorruptData, TombstoneError, Unavailable
from services.verifier.believed.codec import (
    BATCH_NAME,
    BATCH_PREFIX,
    BUCKET_NAME,
    HEADER,
    LAYOUT,
    MAX_ROLL,
    batch_name,
    bucket_name,
    decode_batch,
    encode_batch,
    key_values,
    keys_of,
)
from services.verifier.believed.config import BelievedConfig
from services.verifier.ports import ZnodeStore

_log = structlog.get_logger(__name__)

_READ_BYTES = 4 << 20
"""Batch bytes per multiRead while loading (bounds a reply; batches are ≤ 16 B per entry)."""
_READS_IN_FLIGHT = 4


@dataclass(eq=False)
class _Bucket:
    name: str
    slot_ms: int
    batches: dict[int, array.array[int]] = field(default_factory=dict)
    """Loaded batches by sequence number (the flat id, digest, id, digest... array)."""
    next_seq: int = 0
    """Every sequence number below this one has been looked at (loaded, corrupt or absent)."""
    watched: int | None = None
    """The sequence number whose creation an exists-watch is waiting for."""
    entries: int = 0
    full: bool = False
    """Writers roll to the next bucket (it reached `bucket_batches` batches)."""
    created_at: int = 0
    """The set's change counter when this replica's writer registered the bucket (0: listed)."""

    @property
    def roll(self) -> int:
        return int(self.name[14:])


@dataclass(eq=False)
class _Call:
    keys: Sequence[int]
    done: asyncio.Future[None]
    taken: int = 0
    """Keys handed to writes so far."""
    written: int = 0
    """Keys durably written."""


class BelievedSet:
    """The in-memory view of the durable set, kept in step by watches on single names."""

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
        self._layout = f"{config.root}/{LAYOUT}"
        self._buckets: dict[str, _Bucket] = {}
        self._members: dict[int, int] = {}
        self._size = 0
        self._batch_count = 0
        self._epoch: int | None = None
        self._changes = 0
        """Counts buckets registered by this replica's writer (see `_Bucket.created_at`)."""
        self._lock = asyncio.Lock()
        """Serialises the readers (refresh, watch follow-ups); the writer needs no lock."""
        self._refresh_lock = asyncio.Lock()
        self._refreshes_started = 0
        self._refreshes_finished = 0
        self._queue: deque[_Call] = deque()
        self._writing: _Bucket | None = None
        self._relist_wanted = False
        self._dirty: set[str] = set()
        self._expiring: set[str] = set()
        self._committers: set[asyncio.Task[None]] = set()
        self._follower: asyncio.Task[None] | None = None
        self._expirer: asyncio.Task[None] | None = None
        self.loaded = False
        """True once a full load succeeded (before that every lookup is a miss)."""

    def __contains__(self, key: int) -> bool:
        return key in self._members

    def __len__(self) -> int:
        return self._size

    @property
    def batches(self) -> int:
        return self._batch_count

    @property
    def buckets(self) -> int:
        return len(self._buckets)

    # -- writing: group commit ------------------------------------------------------------

    async def add(self, keys: Sequence[int]) -> int:
        """Write `keys` durably, then hold them here; raises what the write raised.

        Calls arriving together share one batch znode (see the module docstring). A call
        larger than a batch spans several; if one of them fails, the call fails (batches
        already written stay: each entry stands alone).
        """
        if not keys:
            return 0
        loop = asyncio.get_running_loop()
        call = _Call(keys, loop.create_future())
        self._queue.append(call)
        if len(self._committers) < self._config.writes_in_flight:
            committer = loop.create_task(self._commit())
            self._committers.add(committer)
            committer.add_done_callback(self._committers.discard)
        await call.done
        return len(keys)

    async def _commit(self) -> None:
        carried: list[tuple[_Call, int]] = []
        try:
            while self._queue:
                await asyncio.sleep(self._config.commit_delay.total_seconds())
                keys, carried = self._take()
                if not keys:
                    continue
                try:
                    await self._write(keys)
                except Exception as e:
                    for call, _count in carried:
                        if not call.done.done():
                            call.done.set_exception(e)
                    carried = []
                    continue
                for call, count in carried:
                    call.written += count
                    if call.written == len(call.keys) and not call.done.done():
                        call.done.set_result(None)
                carried = []
        finally:
            # Cancelled (the set is closing): nothing will write what is left.
            stopped = Unavailable("believed set closed before the write")
            for call in [c for c, _n in carried] + list(self._queue):
                if not call.done.done():
                    call.done.set_exception(stopped)
            self._queue.clear()

    def _take(self) -> tuple[list[int], list[tuple[_Call, int]]]:
        """Up to one batch of keys from the queued calls, and how many each call gave."""
        limit = self._config.batch_entries
        keys: list[int] = []
        carried: list[tuple[_Call, int]] = []
        queue = self._queue
        while queue and len(keys) < limit:
            call = queue[0]
            if call.done.done():  # failed in an earlier batch, or the caller gave up
                queue.popleft()
                continue
            count = min(limit - len(keys), len(call.keys) - call.taken)
            keys.extend(call.keys[call.taken : call.taken + count])
            call.taken += count
            carried.append((call, count))
            if call.taken == len(call.keys):
                queue.popleft()
        return keys, carried

    async def _write(self, keys: list[int]) -> None:
        bucket = self._target_bucket(len(keys))
        prefix = f"{self._layout}/{bucket.name}/{BATCH_PREFIX}"
        path = await self._store.create_sequential(prefix, encode_batch(keys))
        match = BATCH_NAME.fullmatch(path.rsplit("/", 1)[-1])
        if match is None:  # not what ZooKeeper names a sequential child
            raise CorruptData(f"{path}: unexpected sequential name")
        sequence = int(match.group(1))
        if self._buckets.get(bucket.name) is None:
            self._changes += 1
            bucket.created_at = self._changes
            self._buckets[bucket.name] = bucket
            new_bucket = True
        else:
            bucket = self._buckets[bucket.name]
            new_bucket = False
        self._insert(bucket, sequence, key_values(keys))
        if sequence + 1 >= self._config.bucket_batches:
            bucket.full = True
        self._writing = bucket
        if new_bucket or self._size > self._config.max_entries:
            self._bound()

    def _target_bucket(self, count: int) -> _Bucket:
        """The bucket of the current slot that still has room (a new one when none has)."""
        span_ms = max(1, int(self._config.bucket_span.total_seconds() * 1000))
        now_ms = int(self._clock() * 1000)
        slot_ms = now_ms - now_ms % span_ms
        current = self._writing
        if current is None or current.slot_ms != slot_ms or self._buckets.get(current.name) is None:
            prefix = bucket_name(slot_ms, 0)[:14]
            same_slot = [b for name, b in self._buckets.items() if name.startswith(prefix)]
            current = max(same_slot, key=lambda b: b.roll, default=None)
        if current is None:
            return _Bucket(bucket_name(slot_ms, 0), slot_ms)
        room = current.entries == 0 or current.entries + count <= self._config.bucket_entries
        if (current.full or not room) and current.roll < MAX_ROLL:
            name = bucket_name(slot_ms, current.roll + 1)
            return self._buckets.get(name) or _Bucket(name, slot_ms)
        return current

    # -- memory -----------------------------------------------------------------------------

    def _insert(self, bucket: _Bucket, sequence: int, values: array.array[int]) -> None:
        if sequence in bucket.batches:
            return
        bucket.batches[sequence] = values
        count = len(values) // 2
        bucket.entries += count
        self._size += count
        self._batch_count += 1
        members = self._members
        for key in keys_of(values):
            members[key] = members.get(key, 0) + 1
        while bucket.next_seq in bucket.batches:
            bucket.next_seq += 1

    def _drop(self, name: str) -> None:
        bucket = self._buckets.pop(name)
        if self._writing is bucket:
            self._writing = None
        if bucket.watched is not None:
            self._store.unwatch(self._batch_path(name, bucket.watched), self._on_batch)
        members = self._members
        for values in bucket.batches.values():
            for key in keys_of(values):
                left = members[key] - 1
                if left:
                    members[key] = left
                else:
                    del members[key]
        self._size -= bucket.entries
        self._batch_count -= len(bucket.batches)

    def _over_bound(self) -> list[str]:
        """Buckets to drop: everything older than the newest buckets within both bounds."""
        oldest_ms = (self._clock() - self._config.max_age.total_seconds()) * 1000
        kept = 0
        drop: list[str] = []
        for name in sorted(self._buckets, reverse=True):
            bucket = self._buckets[name]
            too_many = kept + bucket.entries > self._config.max_entries
            if drop or too_many or bucket.slot_ms < oldest_ms:
                drop.append(name)
            else:
                kept += bucket.entries
        return drop

    def _bound(self) -> None:
        """Apply the bounds to memory now; delete the dropped buckets in the background."""
        drop = self._over_bound()
        for name in drop:
            self._drop(name)
        if drop:
            self._expiring.update(drop)
            if self._expirer is None or self._expirer.done():
                self._expirer = asyncio.get_running_loop().create_task(self._expire())

    async def apply_bounds(self) -> None:
        """Apply the bounds now and wait until the dropped buckets are deleted (best effort)."""
        self._bound()
        if self._expirer is not None and not self._expirer.done():
            await self._expirer

    async def _expire(self) -> None:
        while self._expiring:
            name = min(self._expiring)
            self._expiring.discard(name)
            if name in self._buckets:  # listed again and kept (e.g. a later write): keep it
                continue
            path = f"{self._layout}/{name}"
            try:
                children = await self._store.children(path) or []
                await self._store.delete_all([f"{path}/{child}" for child in children])
                await self._store.delete(path)
            except TombstoneError as e:
                # Best effort: the store is down, or a writer added a batch meanwhile (not
                # empty). The rule drops it again when it is listed next time.
                _log.info("believed_bucket_delete_failed", bucket=name, error=str(e))

    # -- following the store ------------------------------------------------------------------

    async def refresh(self) -> None:
        """Catch up with the store, as of no earlier than this call.

        Callers arriving together share one catch-up: one that started after a caller asked
        and has finished answers that caller too (a burst of MISMATCH verdicts costs one,
        not one each).
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
        async with self._lock:
            epoch = self._store.epoch()
            if epoch != self._epoch:
                for bucket in self._buckets.values():
                    bucket.watched = None  # watches may be lost with the connection
            await self._relist()
            await self._catch_up(list(self._buckets.values()))
            self._epoch = epoch
            self.loaded = True
        self._bound()

    async def _relist(self) -> list[_Bucket]:
        """Read the bucket list (and watch it); the buckets that need a catch-up."""
        changes = self._changes
        names = await self._store.children(self._layout, watch=self._on_buckets)
        # No bucket yet: watch for the layout's creation instead.
        if names is None and await self._store.watch_node(self._layout, self._on_buckets):
            names = await self._store.children(self._layout, watch=self._on_buckets)
        present = {name for name in names or () if BUCKET_NAME.fullmatch(name)}
        for name, bucket in list(self._buckets.items()):
            # A bucket this replica's writer registered after the list was asked for may
            # be missing from it: not gone.
            if name not in present and bucket.created_at <= changes:
                self._drop(name)
        for name in sorted(present - self._buckets.keys()):
            self._buckets[name] = _Bucket(name, int(name[:13]))
        return [bucket for bucket in self._buckets.values() if bucket.watched is None]

    async def _catch_up(self, buckets: Iterable[_Bucket]) -> None:
        """Load the batches created in `buckets` since they were last looked at, then watch
        the next name of each (again for those where it exists already)."""
        pending = list(dict.fromkeys(buckets))
        # Batches known to exist beyond what the bucket's count said: on Oxia a bucket's count
        # is advanced just after its new batch is made, so the batch a watch finds may not be
        # counted yet. It is loaded all the same (else, watched already, it would never be).
        found: dict[_Bucket, int] = {}
        while pending:
            changes = self._changes
            stats = await self._store.read_many([f"{self._layout}/{b.name}" for b in pending])
            tops: dict[_Bucket, int] = {}
            wanted: list[tuple[_Bucket, int]] = []
            for bucket, stat in zip(pending, stats, strict=True):
                if isinstance(stat, Exception):
                    raise stat
                if self._buckets.get(bucket.name) is not bucket:
                    continue
                if stat is None:
                    if bucket.created_at <= changes:
                        self._drop(bucket.name)
                    continue
                top = tops[bucket] = max(stat.cversion, found.get(bucket, 0))
                bucket.full = bucket.full or stat.cversion >= self._config.bucket_batches
                wanted += [
                    (bucket, n) for n in range(bucket.next_seq, top) if n not in bucket.batches
                ]
            await self._load(wanted)
            for bucket, top in tops.items():
                bucket.next_seq = max(bucket.next_seq, top)
            current = [b for b in tops if self._buckets.get(b.name) is b]
            exists = await asyncio.gather(*(self._watch_next(b) for b in current))
            pending = [bucket for bucket, again in zip(current, exists, strict=True) if again]
            found |= {bucket: bucket.next_seq + 1 for bucket in pending}

    async def _load(self, wanted: list[tuple[_Bucket, int]]) -> None:
        """Read and insert these batches (multiRead, a few requests in flight)."""
        per_read = max(1, _READ_BYTES // (16 * self._config.max_batch_entries + HEADER.size))
        groups = [wanted[i : i + per_read] for i in range(0, len(wanted), per_read)]
        limit = asyncio.Semaphore(_READS_IN_FLIGHT)
        failures: list[Exception] = []

        async def load(group: list[tuple[_Bucket, int]]) -> None:
            async with limit:
                paths = [self._batch_path(b.name, n) for b, n in group]
                nodes = await self._store.read_many(paths)
            for (bucket, sequence), path, node in zip(group, paths, nodes, strict=True):
                if isinstance(node, Exception):
                    failures.append(node)
                elif node is not None and self._buckets.get(bucket.name) is bucket:
                    try:
                        values = decode_batch(node.data, path)
                    except CorruptData:
                        # Not ours or damaged: a miss is safe, so skip it; never fatal.
                        _log.warning("believed_batch_corrupt", path=path)
                        continue
                    self._insert(bucket, sequence, values)

        await asyncio.gather(*(load(group) for group in groups))
        if failures:
            raise failures[0]  # the loaded ones stay; the rest is read next time

    async def _watch_next(self, bucket: _Bucket) -> bool:
        """Watch the creation of the bucket's next batch; True when it exists already."""
        if bucket.watched == bucket.next_seq:
            return False
        if bucket.watched is not None:
            self._store.unwatch(self._batch_path(bucket.name, bucket.watched), self._on_batch)
        bucket.watched = bucket.next_seq
        path = self._batch_path(bucket.name, bucket.next_seq)
        return await self._store.watch_node(path, self._on_batch)

    def _batch_path(self, bucket: str, sequence: int) -> str:
        return f"{self._layout}/{bucket}/{batch_name(sequence)}"

    def _on_buckets(self, _path: str) -> None:
        self._relist_wanted = True
        self._follow_soon()

    def _on_batch(self, path: str) -> None:
        bucket = self._buckets.get(path.rsplit("/", 2)[-2])
        if (
            bucket is not None
            and bucket.watched is not None
            and path.endswith(batch_name(bucket.watched))
        ):
            bucket.watched = None  # the one-shot watch is spent
        self._dirty.add(path.rsplit("/", 2)[-2])
        self._follow_soon()

    def _follow_soon(self) -> None:
        if self._follower is None or self._follower.done():
            self._follower = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        """What the watches asked for: a new bucket list, new batches in some buckets."""
        try:
            while self._relist_wanted or self._dirty:
                async with self._lock:
                    buckets: list[_Bucket] = []
                    if self._relist_wanted:
                        self._relist_wanted = False
                        buckets += await self._relist()
                    dirty, self._dirty = self._dirty, set()
                    buckets += [self._buckets[n] for n in sorted(dirty) if n in self._buckets]
                    await self._catch_up(buckets)
                self._bound()
        except TombstoneError as e:
            # The next refresh (maintain: resync, reconnection) catches up.
            _log.warning("believed_follow_failed", error=str(e))

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
        """Background loop: catch up at start, after a reconnection (watches may be lost),
        after a failed load and every `resync`; in between, re-apply the age bound."""
        last_full = float("-inf")
        while True:
            stale = not self.loaded or self._epoch != self._store.epoch()
            if stale or time.monotonic() - last_full >= resync.total_seconds():
                await self._safe_refresh()
                last_full = time.monotonic()
            else:
                await self.apply_bounds()
            await asyncio.sleep(interval.total_seconds())

    def close(self) -> None:
        """Cancel the background work (the service is stopping)."""
        for task in (*self._committers, self._follower, self._expirer):
            if task is not None:
                task.cancel()
