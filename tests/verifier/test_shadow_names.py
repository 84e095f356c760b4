"""The shadow index reads every ML znode ZooKeeper lists, canonical name or not."""

from __future__ import annotations

from collections.abc import AsyncIterator

from services.metadata.pulsar_formats import ManagedLedgerInfo, encode_managed_ledger_info
from services.verifier.owners import SHADOW_SOURCE
from services.verifier.shadows import ShadowIndex
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
