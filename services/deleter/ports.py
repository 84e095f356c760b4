"""The deleter's ports: where verdicts come from and what deletes. No library imports here.

Adapters: `_verifier.py` (gRPC verifier), `backends/` (ZooKeeper, bookie HTTP, S3,
filesystem). The message source and sinks are the system-topic ports of `services.systopic`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol

from services.core.errors import TombstoneError, Unavailable
from tombstone.v1 import pending_delete_pb2 as _pd
from tombstone.v1 import verifier_pb2 as _vf


class Tier(enum.StrEnum):
    """Where a copy of a ledger lives (the `tier` label of the metrics)."""

    BOOKKEEPER = "bookkeeper"
    S3 = "s3"
    FILESYSTEM = "filesystem"


class DeleteFailed(TombstoneError):
    """A delete did not complete. `permanent` means retrying cannot help (an operator must);
    `outage` that the store did not answer (connection lost, 5xx): the deleter pauses and
    decides the PDLI again once the store is back, spending no retry."""

    def __init__(
        self, tier: Tier, reason: str, *, permanent: bool = False, outage: bool = False
    ) -> None:
        super().__init__(f"{tier} delete failed: {reason}")
        self.tier = tier
        self.reason = reason
        self.permanent = permanent
        self.outage = outage and not permanent


class VerifierUnreachable(Unavailable):
    """The verifier gave no answer (down, unreachable, timed out): an outage, unlike an error
    it answered with (a bug on one PDLI), which is retried like any RETRY."""


@dataclass(frozen=True)
class DeleteResult:
    """A completed delete: the copy is absent now."""

    tier: Tier
    removed: bool
    """False when it was already absent ("not found" counts as deleted)."""
    evidence: dict[str, object]
    """What was deleted, for the audit line."""


class VerdictSource(Protocol):
    """The verifier (docs/design.md §4)."""

    async def verify(self, pdli: _pd.PendingDeleteLedgerInfo) -> _vf.VerifyResponse:
        """The verdict for one PDLI; `Unavailable` (or another `TombstoneError`) if unknown."""
        ...


class BookKeeperDeleter(Protocol):
    """Removes a ledger's metadata (BookKeeper reclaims the data at its next GC)."""

    async def delete_ledger(self, *, ledger_id: int, path: str, version: int) -> DeleteResult:
        """Delete at `version`; already absent is success. `DeleteFailed` otherwise."""
        ...


class OffloadDeleter(Protocol):
    """Removes a ledger's offloaded copy and confirms it is gone."""

    async def delete_offloaded(
        self, *, ledger_id: int, evidence: _vf.OffloadEvidence
    ) -> DeleteResult:
        """Delete every object (or the path) of the evidence; absent is success."""
        ...
