"""The shadow-topic index: which managed ledgers copy another's ledger list (PIP-180).

A shadow ML's znode lists its source's ledger ids and names the source in its
`PULSAR.SHADOW_SOURCE` property; nothing on the source side points at the shadows. So the
verifier scans `/managed-ledgers` (every ML znode once) at start and then periodically, and
the in-use step also consults the shadows of a data ledger's ML (through the watched owner
cache, so each shadow costs a read only when it changed).

A shadow created after the last scan is unknown until the next one, so the index is only
trusted for a ledger that left its source's list before the last completed scan started
(`fresh_since`); for a newer one the verdict is RETRY and a scan is asked for at once, no
sooner than `min_gap` after the previous one started (a steady stream of new intents then
costs one scan per gap, not one per intent). Until the first scan completes, data-ledger
verdicts are RETRY ("shadow index not ready").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta

import structlog

from services.core.errors import InvalidArgument, TombstoneError
from services.metadata.pulsar_formats import SHADOW_SOURCE, decode_managed_ledger_info
from services.metadata.pulsar_names import MANAGED_LEDGERS_ROOT, managed_ledger_name
from services.verifier.ports import ZnodeStore

_log = structlog.get_logger(__name__)
_CONCURRENCY = 64


def _first(group: BaseExceptionGroup[TombstoneError]) -> TombstoneError:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, TombstoneError)
    return error


class ShadowIndex:
    """source ML name → ML paths of its shadows, rebuilt by a full scan."""

    def __init__(
        self,
        store: ZnodeStore,
        names: Callable[[], AsyncIterator[str]],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`names` lists every ML name (the metadata layer's `ManagedLedgers` walk)."""
        self._store = store
        self._names = names
        self._clock = clock
        self._shadows: dict[str, tuple[str, ...]] = {}
        self._wanted = asyncio.Event()
        self.ready = False
        self.scanned_mls = 0
        self.scan_started_ms = 0
        """When the scan behind the index started (epoch ms); 0 before the first."""
        self.scans = 0
        self.requested_scans = 0

    def shadows_of(self, ml_name: str) -> Sequence[str]:
        return self._shadows.get(ml_name, ())

    def fresh_since(self, ms: int) -> bool:
        if self.ready and self.scan_started_ms >= ms:
            return True
        self._wanted.set()
        return False

    async def scan(self) -> None:
        """Read every ML znode; replace the index only when the whole scan succeeded."""
        started_ms = int(self._clock() * 1000)
        found: dict[str, list[str]] = {}
        # The names come from ZooKeeper's own listing, so each path is a znode that exists:
        # it is read as listed, canonical or not. A name Pulsar would not write can only add
        # a shadow reference here (a RETRY, never a DELETE); refusing it would fail the scan.
        ml_paths = [f"{MANAGED_LEDGERS_ROOT}/{name}" async for name in self._names()]
        limit = asyncio.Semaphore(_CONCURRENCY)

        async def check(path: str) -> None:
            async with limit:
                node = await self._store.read(path)
            if node is None or not node.data:
                return
            info = decode_managed_ledger_info(node.data, path=path)
            source = next((p.value for p in info.properties if p.key == SHADOW_SOURCE), None)
            if source is not None:
                try:
                    found.setdefault(managed_ledger_name(source), []).append(path)
                except InvalidArgument:
                    _log.warning("shadow_source_unparsable", path=path, source=source)

        try:
            async with asyncio.TaskGroup() as group:
                for path in ml_paths:
                    group.create_task(check(path))
        except ExceptionGroup as failed:
            # One read's failure (a lost connection) fails the scan as that error, so the
            # loop retries it; a group would pass `except TombstoneError` by and end the loop
            # (and with it the service).
            known, other = failed.split(TombstoneError)
            if known is None or other is not None:
                raise
            raise _first(known) from failed
        self._shadows = {source: tuple(paths) for source, paths in found.items()}
        self.scanned_mls = len(ml_paths)
        self.scan_started_ms = started_ms
        self.scans += 1
        self.ready = True

    async def _wait(self, delay: float, min_gap: float, started: float) -> None:
        """Sleep `delay`, or less when a verdict asks for a scan: until `min_gap` after the
        last scan `started` (the loop's clock)."""
        try:
            await asyncio.wait_for(self._wanted.wait(), timeout=delay)
        except TimeoutError:
            return
        self.requested_scans += 1
        gap = started + min_gap - asyncio.get_running_loop().time()
        if gap > 0:
            await asyncio.sleep(gap)

    async def run(self, interval: timedelta, min_gap: timedelta = timedelta(seconds=5)) -> None:
        """Background loop: scan now, then every `interval` or sooner when asked (retrying
        sooner after a failure)."""
        while True:
            started = asyncio.get_running_loop().time()
            # Requests that arrive during this scan are not served by it: it may have listed
            # the MLs before their shadows were created.
            self._wanted.clear()
            try:
                await self.scan()
                delay = interval.total_seconds()
                _log.info(
                    "shadow_scan_done",
                    managed_ledgers=self.scanned_mls,
                    sources_with_shadows=len(self._shadows),
                )
            except TombstoneError as e:
                _log.warning("shadow_scan_failed", error=str(e))
                delay = min(interval.total_seconds(), 5.0)
            await self._wait(delay, min_gap.total_seconds(), started)
