"""The deleter pool (phase 2 of the two-phase deletion protocol, docs/design.md §2).

Workers consume the system topic and its retry topic on a Shared subscription, ask the
verifier, delete from BookKeeper or the offload tier on DELETE, and settle every message
exactly once: acknowledge, retry through the retry topic, or dead-letter.
"""

from services.deleter.pool import DeleterPool, PoolSettings, PoolStatus
from services.deleter.ports import (
    BookKeeperDeleter,
    DeleteFailed,
    DeleteResult,
    OffloadDeleter,
    Tier,
    VerdictSource,
)

__all__ = [
    "BookKeeperDeleter",
    "DeleteFailed",
    "DeleteResult",
    "DeleterPool",
    "OffloadDeleter",
    "PoolSettings",
    "PoolStatus",
    "Tier",
    "VerdictSource",
]
