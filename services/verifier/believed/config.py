"""Where the believed set lives and how big and old it may grow."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class BelievedConfig:
    """Where the set lives and how big and old it may grow."""

    root: str = "/tombstone/believed"
    """Parent znode of the layout (`<root>/v2/<bucket>/<batch>`)."""
    max_entries: int = 500_000
    """Bound on the entries held (newest buckets win)."""
    max_age: timedelta = timedelta(hours=24)
    """Buckets whose slot started longer ago than this are dropped."""
    max_batch_entries: int = 16_384
    """Entries per batch znode (16 bytes each: 256 KiB, well under ZooKeeper's 1 MB)."""
    bucket_span: timedelta = timedelta(hours=1)
    """Time slot of a bucket: the granularity of the age bound."""
    bucket_batches: int = 1_000
    """Batches per bucket before writers roll to the next (bounds a children list)."""
    commit_delay: timedelta = timedelta(milliseconds=2)
    """How long a committer waits for more calls before a write."""
    writes_in_flight: int = 4
    """Batch writes in flight at once (each carries what queued while the others ran)."""

    @property
    def bucket_entries(self) -> int:
        """Entries per bucket before writers roll: a quarter of the bound, so dropping whole
        buckets by count keeps at least three quarters of `max_entries`."""
        return max(1, self.max_entries // 4)

    @property
    def batch_entries(self) -> int:
        """Entries per write (a batch never alone fills more than a bucket may hold)."""
        return max(1, min(self.max_batch_entries, self.bucket_entries))
