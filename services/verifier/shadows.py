"""The shadow-topic index: which managed ledgers copy another's ledger list (PIP-180).

A shadow ML's znode lists its source's ledger ids and names the source in its
`PULSAR.SHADOW_SOURCE` property; nothing on the source side points at the shadows. So the
verifier scans `/managed-ledgers` (every ML znode once) at start and then periodically, and
the in-use step also consults the shadows of a data ledger's ML (through the watched owner
cache, so each shadow costs a read only when it changed).

Limit: a shadow created after the last scan is unknown until the next one. Until the first
scan completes, data-ledger verdicts are RETRY ("shadow index not ready").
"""

from __future__ import annotations

import asyncio
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

    def __init__(self, store: ZnodeStore, names: Callable[[], AsyncIterator[str]]) -> None:
        """`names` lists every ML name (the metadata layer's `ManagedLedgers` walk)."""
        self._store = store
        self._names = names
        self._shadows: dict[str, tuple[str, ...]] = {}
        self.ready = False
        self.scanned_mls = 0

    def shadows_of(self, ml_name: str) -> Sequence[str]:
        return self._shadows.get(ml_name, ())

    async def scan(self) -> None:
        """Read every ML znode; replace the index only when the whole scan succeeded."""
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
        self.ready = True

    async def run(self, interval: timedelta) -> None:
        """Background loop: scan now, then every `interval` (retrying sooner after a failure)."""
        while True:
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
            await asyncio.sleep(delay)
