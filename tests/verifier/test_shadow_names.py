"""The shadow index reads every ML znode ZooKeeper lists, canonical name or not, and a
failed read fails one scan, never the loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    ManagedLedgerInfo,
    encode_managed_ledger_info,
)
from services.verifier.ports import WatchCallback, Znode
from services.verifier.shadows import ShadowIndex
from services.verifier.store_adapter import ZooKeeperUnavailable
from tests.verifier.memory import MemoryZnodes

ODD = "t/ns/persistent/a%2Fb"  # a V1-era local name with '/', which Tombstone refuses


async def test_a_listed_non_canonical_name_still_counts_as_a_shadow() -> None:
    """A listed ML whose name Tombstone would refuse in a PDLI still adds its shadow
    reference (more references can only delay a delete), and the scan completes."""
    znodes = MemoryZnodes()
    info = ManagedLedgerInfo()
    info.properties.add(key=SHADOW_SOURCE, value="persistent://t/ns/source")
    znodes.put(f"/managed-ledgers/{ODD}", encode_managed_ledger_info(info))

    async def names() -> AsyncIterator[str]:
        yield ODD

    index = ShadowIndex(znodes, names)
    await index.scan()
    assert (index.ready, list(index.shadows_of("t/ns/persistent/source"))) == (
        True,
        [f"/managed-ledgers/{ODD}"],
    )


class _LosesOneRead:
    """Answers as `inner`, except that the first read of `path` loses its connection."""

    def __init__(self, inner: MemoryZnodes, path: str) -> None:
        self._inner, self._path, self.failed = inner, path, False

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    async def read(self, path: str, *, watch: WatchCallback | None = None) -> Znode | None:
        if path == self._path and not self.failed:
            self.failed = True
            raise ZooKeeperUnavailable(path, "connection loss")
        return await self._inner.read(path, watch=watch)


async def test_a_lost_read_fails_the_scan_and_the_loop_scans_again() -> None:
    """Found by the simulation: the scan's reads run in a task group, so a lost connection
    left it as an ExceptionGroup that `run` did not catch: the loop ended, and the service
    runner stops the whole verifier when a background task fails."""
    znodes = MemoryZnodes()
    info = ManagedLedgerInfo()
    info.properties.add(key=SHADOW_SOURCE, value="persistent://t/ns/source")
    shadow = "t/ns/persistent/shadow"
    znodes.put(f"/managed-ledgers/{shadow}", encode_managed_ledger_info(info))
    znodes.put(
        "/managed-ledgers/t/ns/persistent/source", encode_managed_ledger_info(ManagedLedgerInfo())
    )

    async def names() -> AsyncIterator[str]:
        yield "t/ns/persistent/source"
        yield shadow

    store = _LosesOneRead(znodes, f"/managed-ledgers/{shadow}")
    index = ShadowIndex(store, names)  # type: ignore[arg-type]
    with pytest.raises(ZooKeeperUnavailable):
        await index.scan()
    loop = asyncio.create_task(index.run(timedelta(milliseconds=1)))
    try:
        async with asyncio.timeout(30):
            while not index.ready:  # noqa: ASYNC110 - the index exposes no event
                await asyncio.sleep(0.01)
    finally:
        loop.cancel()
    assert list(index.shadows_of("t/ns/persistent/source")) == [f"/managed-ledgers/{shadow}"]
