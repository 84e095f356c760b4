"""`--broker-style`: the load test's brokers trim as unmodified Pulsar does, with no call to
the marker (`devstack.simulator.broker` names the Pulsar source of each step).

A trim writes the shorter list with a compare-and-set at the version the broker holds, flags
the kept, completely offloaded ledgers `bookkeeperDeleted` in the same write, and only then
deletes — in the background, as the broker's write callback does: each BookKeeper copy with
up to three attempts `backoff` apart, the objects once. A seeded share of the deletions fails
every attempt; what they leave behind is for the marker's follower to turn into intents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from devstack.simulator.broker import BOOKKEEPER, BrokerDelete, BrokerDeleter, DeleteFaults
from devstack.simulator.broker import plan_trim as plan_broker_trim
from devstack.simulator.s3 import ObjectStore
from services.metadata import LedgerInfo, ManagedLedgerInfo, ManagedLedgers, MetadataStore
from tombstone.v1 import pending_delete_pb2 as _pd

OnUnlinked = Callable[[int, int, tuple[str, ...]], None]
"""Called with (ledger id, PDLI ledger type, object keys) for each (ledger, tier) unlinked."""


@dataclass
class BrokerStats:
    trims: int = 0
    """List writes that unlinked something."""
    unlinked: int = 0
    """(ledger, tier) pairs those writes unlinked."""
    deletes_done: int = 0
    deletes_failed: int = 0
    """Deletions the brokers gave up on (injected, or a real store error)."""


class BrokerTrimmer:
    """Trims topics the way a broker does; its deletes run in the background."""

    def __init__(
        self,
        store: MetadataStore,
        objects: ObjectStore,
        mls: ManagedLedgers,
        *,
        bucket: str,
        faults: DeleteFaults,
        backoff_seconds: float,
        on_unlinked: OnUnlinked,
    ) -> None:
        self.mls = mls
        self.bucket = bucket
        self.faults = faults
        self.deleter = BrokerDeleter(store, objects, faults=faults, backoff_seconds=backoff_seconds)
        self.on_unlinked = on_unlinked
        self.stats = BrokerStats()
        self._deletes: set[asyncio.Task[None]] = set()

    @property
    def failures_injected(self) -> int:
        return self.faults.injected

    async def trim(
        self, ml_name: str, info: ManagedLedgerInfo, version: int, keep: int
    ) -> tuple[ManagedLedgerInfo, int] | None:
        """Keep the newest `keep` ledgers: write the list at `version`, then start the
        deletes. Returns the list and version written; None when there was nothing to trim.
        A failed write raises and deletes nothing, as in `internalTrimLedgers`."""
        listed = list(info.ledgerInfo)
        if len(listed) <= keep:
            return None
        plan = plan_broker_trim(
            info,
            len(listed) - keep,
            flag_bookkeeper_deleted=flaggable(listed[-keep:]),
            default_bucket=self.bucket,
        )
        written = await self.mls.write(ml_name, plan.info, version=version)
        self.stats.trims += 1
        self._start_deletes(plan.deletes)
        return plan.info, written

    def _start_deletes(self, deletes: tuple[BrokerDelete, ...]) -> None:
        for item in deletes:
            tier = _pd.LEDGER if item.tier == BOOKKEEPER else _pd.OFFLOAD_LEDGER
            self.on_unlinked(item.ledger_id, tier, item.object_keys)
            task = asyncio.create_task(self._delete(item))
            self._deletes.add(task)
            task.add_done_callback(self._deletes.discard)
        self.stats.unlinked += len(deletes)

    async def _delete(self, item: BrokerDelete) -> None:
        outcome = await self.deleter.delete(item)
        if outcome.deleted:
            self.stats.deletes_done += 1
        else:
            self.stats.deletes_failed += 1

    async def wait(self) -> None:
        """Until every delete started has succeeded or been given up."""
        while self._deletes:
            await asyncio.gather(*list(self._deletes))


def flaggable(kept: list[LedgerInfo]) -> list[int]:
    """Kept ledgers a broker flags `bookkeeperDeleted` once the offload deletion lag passed
    (`ManagedLedgerImpl.isOffloadedNeedsDelete`): completely offloaded, still in BookKeeper,
    not the current (last) ledger."""
    return [
        e.ledgerId
        for e in kept[:-1]
        if e.offloadContext.complete and not e.offloadContext.bookkeeperDeleted
    ]
