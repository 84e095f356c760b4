"""The believed set: (ledger, tier, owner) identities the marker reported as unlinked.

Durable and shared in the metadata store, with bounded ZooKeeper work per `Believe` call, bounded
znodes and bounded children lists (`<root>` is `TOMBSTONE_VERIFIER_BELIEVED_PATH`):

    <root>/v2/<slot>-<roll>/b-<sequence>

- **Batches.** A batch znode holds a compact encoding (16 bytes per entry: the ledger id and a
  64-bit digest of the rest of the identity), at most `max_batch_entries` entries.
- **Group commit.** `add` queues the call's keys and waits; a committer (at most
  `writes_in_flight` at once) takes whatever queued while the other writes were in flight
  (after `commit_delay`), writes it as ONE sequential znode, and only then answers every call
  it carried. So N concurrent single-key calls cost a few creates per write latency, not N
  creates; a failed write fails exactly the calls it carried, and nothing of it enters memory
  (memory only ever holds durable batches).
- **Buckets.** Batches go under a bucket named by the writer's time slot (`bucket_span`, 13-digit
  ms of the slot start) and a roll number. A writer rolls to the next roll number when the
  bucket reached `bucket_batches` batches or a quarter of `max_entries` entries. So a bucket's
  children list is bounded (plus the writes in flight when it filled), and the list of
  buckets is bounded by age (`max_age / bucket_span` slots) and count (each kept bucket holds
  at least `bucket_batches` batches or a quarter of the entries, or is one of the slots).
- **Incremental followers.** Batches are PERSISTENT_SEQUENTIAL, so within a bucket their
  numbers are 0, 1, 2... (ZooKeeper's cversion of the bucket; buckets only gain children until
  they are deleted whole). A replica knows, per bucket, the first number it has not looked at,
  and keeps an exists-watch on that one name. When it fires the replica reads the bucket's
  stat (cversion: the next number to be given) and the batches in between (multiRead), and
  watches the next name: O(1) requests per batch written, whatever the set's size (a next
  name the watch finds made is read even before the bucket counts it, as on Oxia). Only the
  bucket list (`<root>/v2`) is listed with a children watch, and it changes once per bucket.
- **Bounds.** One deterministic rule on bucket names, applied by every replica: walking from
  the newest bucket, keep buckets while their cumulative entries are within `max_entries` and
  their slot starts within `max_age`; drop the rest (whole buckets) from memory, and delete
  them from the store (best effort, any replica: the children with ZooKeeper multi, then the
  bucket). Entries are therefore held at most `max_age` and at least `max_age - bucket_span`.
- **Refresh.** `refresh` (before a MISMATCH verdict, at start, after a reconnection, every
  resync) lists the buckets, reads every bucket's stat in one multiRead per 256 buckets, and
  reads only the batches created since: never every batch name.

A miss is never unsafe: it only means the full metadata check. A corrupt or foreign batch is
skipped with a warning, never fatal. The old layout (batches directly under `<root>`) is not
read; what it held only costs the full check.
"""

from services.verifier.believed.codec import (
    LAYOUT,
    batch_name,
    bucket_name,
    decode_batch,
    encode_batch,
    identity_key,
    make_identity_key,
)
from services.verifier.believed.config import BelievedConfig
from services.verifier.believed.replica import BelievedSet

__all__ = [
    "LAYOUT",
    "BelievedConfig",
    "BelievedSet",
    "batch_name",
    "bucket_name",
    "decode_batch",
    "encode_batch",
    "identity_key",
    "make_identity_key",
]
