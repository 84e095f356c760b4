"""Ledgers written next to a simulated cluster as a Pulsar broker's BookKeeper client writes
them: the id from the cluster's own generator, the znode at the hybrid path."""

from __future__ import annotations

import random

from devstack.simulator.spec import FIRST_LONG_LEDGER_ID
from devstack.simulator.writer import FIRST_HOB
from services.metadata import (
    ANY_VERSION,
    BookKeeperLedgers,
    DigestType,
    LedgerLayout,
    LedgerMetadata,
    LedgerPaths,
    LedgerState,
    MetadataStore,
    Segment,
)


class LedgerWriter:
    """Allocates ids from the generator under `root` and writes ledger znodes there; a
    CLOSED ledger holds `entries` entries of `entry_bytes` each, an OPEN one none yet."""

    def __init__(
        self,
        store: MetadataStore,
        root: str,
        bookies: tuple[str, ...],
        ensemble_size: int,
        *,
        long_ids: bool,
        entries: int,
        entry_bytes: int,
    ) -> None:
        self.store = store
        self.root = root
        self.ensemble = tuple(bookies[: min(ensemble_size, len(bookies))])
        self.long_ids = long_ids
        self.entries = entries
        self.entry_bytes = entry_bytes
        # Pulsar >= 2.10 writes the hybrid path whatever `<root>/LAYOUT` names.
        self.bk = BookKeeperLedgers(
            store, paths=LedgerPaths(root=root, layout=LedgerLayout.HIERARCHICAL)
        )

    async def allocate(self) -> int:
        """The next id of the generator the cluster's BookKeeper uses: one sequential child
        created then deleted, as `ZkLedgerIdGenerator` (or `LongZkLedgerIdGenerator`, once
        ids are long) does. Sharing the generator is what keeps ids unique."""
        parent = f"{self.root}/idgen-long/{FIRST_HOB}" if self.long_ids else f"{self.root}/idgen"
        path, _ = await self.store.create_sequential(f"{parent}/ID-")
        await self.store.delete(path, version=ANY_VERSION)
        seq = int(path.rsplit("ID-", 1)[1])
        return FIRST_LONG_LEDGER_ID + seq if self.long_ids else seq

    async def write(self, state: LedgerState, custom: dict[str, bytes]) -> int:
        """A new ledger in `state` with Pulsar's `custom` metadata; returns its id."""
        ledger_id = await self.allocate()
        entries = self.entries if state is LedgerState.CLOSED else 0
        metadata = LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=len(self.ensemble),
            write_quorum=len(self.ensemble),
            ack_quorum=len(self.ensemble),
            state=state,
            length=entries * self.entry_bytes,
            last_entry_id=entries - 1,
            segments=(Segment(0, self.ensemble),),
            digest_type=DigestType.CRC32C,
            password=b"",
            custom_metadata=custom,
            # The creator token BookKeeper >= 4.9 stores (any non-zero long of the creator).
            ctoken=random.Random(ledger_id).getrandbits(63) + 1,
        )
        await self.bk.create(metadata, container_parents=True)
        return ledger_id

    def ledger_path(self, ledger_id: int) -> str:
        return self.bk.paths.ledger_path(ledger_id)
