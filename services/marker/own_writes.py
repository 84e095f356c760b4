"""The owner writes this marker made itself, remembered briefly for the follower.

The follower of a marker that brokers also call sees the marker's own unlinks: their intents
are already on the topic (S3: before the unlink). It asks here before sending them again.
Only a hint: an unlink it cannot find (another marker's, or an older one) is sent again,
which costs a duplicate, never a loss.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

DELETED = -1
"""The version recorded for an unlink that deleted the owner znode."""


class OwnWrites:
    """(owner path, version written) → the (ledger, tier) pairs that write unlinked; the
    last `capacity` writes."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._writes: OrderedDict[tuple[str, int], frozenset[tuple[int, int]]] = OrderedDict()
        self._capacity = capacity

    def record(self, path: str, version: int, unlinked: Iterable[tuple[int, int]]) -> None:
        self._writes[(path, version)] = frozenset(unlinked)
        self._writes.move_to_end((path, version))
        while len(self._writes) > self._capacity:
            self._writes.popitem(last=False)

    def wrote(self, path: str, version: int, ledger_id: int, tier: int) -> bool:
        """Whether this marker's write of `path` at `version` unlinked (ledger, tier) after
        its intent was accepted."""
        return (ledger_id, tier) in self._writes.get((path, version), frozenset())
