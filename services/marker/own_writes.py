"""The intents this marker's Mark calls put on the topic, remembered briefly for the follower.

The follower of a marker that brokers also call sees the marker's own unlinks: their intents
are already on the topic (S3: before the unlink). It asks here before sending them again.
Each accepted (ledger, tier) is recorded under the owner and the fence token (the version
the unlinking write produces), as soon as the receipts are in and before the write: the
follower may read the new version before the Mark call resumes. Whoever makes that version
(the marker, or in caller-writes mode the broker), an intent with that fence token for that
ledger is on the topic. An unlink that deletes the owner is looked up as DELETED: a deleted
owner's ledgers are recorded there too (ledger ids are never reused, so a later owner of the
same name cannot match); only the marker's schema unlinks can delete their owner. Only a
hint: an unlink not found here is sent again, which costs a duplicate, never a loss.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

DELETED = -1
"""The version recorded for an unlink that deleted the owner znode."""


class OwnWrites:
    """(owner path, fence token) → the (ledger, tier) pairs whose intents were accepted; the
    last `capacity` keys."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._writes: OrderedDict[tuple[str, int], frozenset[tuple[int, int]]] = OrderedDict()
        self._capacity = capacity

    def record(
        self,
        path: str,
        version: int,
        accepted: Iterable[tuple[int, int]],
        *,
        may_delete: bool = False,
    ) -> None:
        """`may_delete`: the write may delete the owner (a schema's last versions)."""
        pairs = frozenset(accepted)
        if not pairs:
            return
        keys = [(path, version), (path, DELETED)] if may_delete else [(path, version)]
        for key in keys:
            self._writes[key] = self._writes.get(key, frozenset()) | pairs
            self._writes.move_to_end(key)
        while len(self._writes) > self._capacity:
            self._writes.popitem(last=False)

    def wrote(self, path: str, version: int, ledger_id: int, tier: int) -> bool:
        """Whether an intent for (ledger, tier) with fence token `version` (DELETED: any) of
        `path` was accepted from this marker."""
        return (ledger_id, tier) in self._writes.get((path, version), frozenset())
