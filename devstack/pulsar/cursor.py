"""What a subscription has acknowledged, by entry index in its topic's log.

Indexes are stable (the log is append-only and never trimmed), so a snapshot of this state
is all a restarted broker needs to resume a subscription.
"""

from __future__ import annotations

from typing import Any


class Cursor:
    """Mark-delete position, individual acks above it, partial batch acks, redelivery counts."""

    def __init__(self, mark_delete: int = 0) -> None:
        self.mark_delete = mark_delete
        """Every index below this one is acknowledged."""
        self.acked: set[int] = set()
        self.batch_acks: dict[int, list[int]] = {}
        """index -> bitset words over batch indexes, bit set = not acknowledged yet."""
        self.redelivery_counts: dict[int, int] = {}

    def is_acked(self, index: int) -> bool:
        return index < self.mark_delete or index in self.acked

    def ack(self, index: int) -> bool:
        """Acknowledge one entry; False if it already was."""
        if self.is_acked(index):
            return False
        self.acked.add(index)
        self._forget(index)
        self._advance()
        return True

    def ack_batch_indexes(self, index: int, words: list[int]) -> bool:
        """Record a partial batch ack; returns True when no index of the batch remains."""
        if self.is_acked(index):
            return False
        previous = self.batch_acks.get(index)
        merged = list(words) if previous is None else _intersect(previous, words)
        if not any(merged):
            self.ack(index)
            return True
        self.batch_acks[index] = merged
        return False

    def ack_cumulative(self, index: int) -> list[int]:
        """Acknowledge everything up to and including `index`; returns newly acked indexes."""
        newly = [i for i in range(self.mark_delete, index + 1) if i not in self.acked]
        if index + 1 > self.mark_delete:
            self.mark_delete = index + 1
        for i in newly:
            self._forget(i)
        self.acked = {i for i in self.acked if i >= self.mark_delete}
        self._advance()
        return newly

    def increment_redelivery(self, index: int) -> None:
        self.redelivery_counts[index] = self.redelivery_counts.get(index, 0) + 1

    def reset(self, position: int) -> None:
        """Forget every ack: everything from `position` on is unacknowledged (seek)."""
        self.mark_delete = position
        self.acked.clear()
        self.batch_acks.clear()
        self.redelivery_counts.clear()

    def backlog(self, end: int) -> int:
        """Unacknowledged entries below `end`."""
        return max(0, end - self.mark_delete - len(self.acked))

    def snapshot(self) -> dict[str, Any]:
        return {
            "mark_delete": self.mark_delete,
            "acked": sorted(self.acked),
            "batch_acks": {str(k): v for k, v in self.batch_acks.items()},
            "redelivery_counts": {str(k): v for k, v in self.redelivery_counts.items()},
        }

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> Cursor:
        cursor = cls(int(snapshot["mark_delete"]))
        cursor.acked = {int(i) for i in snapshot.get("acked", [])}
        cursor.batch_acks = {int(k): list(v) for k, v in snapshot.get("batch_acks", {}).items()}
        counts = snapshot.get("redelivery_counts", {})
        cursor.redelivery_counts = {int(k): int(v) for k, v in counts.items()}
        return cursor

    def _forget(self, index: int) -> None:
        self.batch_acks.pop(index, None)
        self.redelivery_counts.pop(index, None)

    def _advance(self) -> None:
        while self.mark_delete in self.acked:
            self.acked.discard(self.mark_delete)
            self.mark_delete += 1


def _intersect(a: list[int], b: list[int]) -> list[int]:
    size = max(len(a), len(b))
    a = a + [0] * (size - len(a))
    b = b + [0] * (size - len(b))
    return [x & y for x, y in zip(a, b, strict=True)]
