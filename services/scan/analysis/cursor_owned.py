"""Ledgers a cursor owns through a property: compacted-topic ledgers and delayed-delivery
buckets (pure column expressions and DataFrame → DataFrame).

Their owner is a cursor znode, `/managed-ledgers/<ml>/<cursor>`:
- a compacted ledger (`TwoPhaseCompactor.phaseTwo` → `cursor.markDelete(pos, props)`) is
  named by the LongProperty `CompactedTopicLedger` of the topic's `__compaction` cursor;
- a delayed-delivery bucket snapshot (`BookkeeperBucketSnapshotStorage`, PIP-195, 3.0+) is
  named by a string cursor property `#pulsar.internal.delayed.bucket_<start>_<end>` of the
  subscription's cursor, whose decoded name the ledger carries in `pulsar/delayedIndexCursor`.

What this module decides is what the znode alone cannot tell. While the `__compaction`
cursor is active (`cursorsLedgerId >= 0`) the live `CompactedTopicLedger` is in the last
`PositionInfo` of the cursor ledger, which the extract does not read: a compacted ledger of
that topic is `reference_unknown` (never proposed), except one whose id is below the value P
the znode persisted. The reference only moves forward: each compaction writes a new ledger,
BookKeeper's ledger-id generators hand out increasing ids, and `ManagedCursorImpl` refuses a
mark-delete position behind the current one, so the live value is P or a later ledger, never
one older than P. A ledger below P was referenced once and is no longer.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

COMPACTION_CURSOR = "__compaction"
COMPACTED_TOPIC_LEDGER = "CompactedTopicLedger"
DELAYED_BUCKET_PREFIX = "#pulsar.internal.delayed.bucket"


def compaction_state(cursors: DataFrame) -> DataFrame:
    """Per ML with an active `__compaction` cursor whose live property was not read:
    `compaction_unknown` (true) and `compaction_floor`, the persisted `CompactedTopicLedger`
    (null when the znode holds none; no ledger is then known to be below the live value)."""
    active = (
        (F.col("cursor_name") == COMPACTION_CURSOR)
        & (F.col("cursors_ledger_id") >= 0)
        & F.col("position_properties").isNull()
    )
    return (
        cursors.filter(active)
        .groupBy("ml_name")
        .agg(
            F.lit(True).alias("compaction_unknown"),
            # One znode per ML; min() only guards against duplicated rows.
            F.min(F.col("properties")[COMPACTED_TOPIC_LEDGER]).alias("compaction_floor"),
        )
    )


def below_persisted(ledger_id: Column, floor: Column) -> Column:
    """Whether the ledger is older than the persisted `CompactedTopicLedger` (the monotonic
    rule, module docstring); false when no value is persisted."""
    return F.coalesce(ledger_id < floor, F.lit(False))


def owner_cursor() -> Column:
    """The cursor znode name a PDLI of the ledger names (null for roles owned otherwise).

    A cursor ledger names it in `pulsar/cursor`; a compacted ledger's is always
    `__compaction`; a bucket carries the decoded subscription, which Pulsar encodes for the
    znode name as `Codec.encode` (java.net.URLEncoder, as Spark's `url_encode`).
    """
    role = F.col("role")
    return (
        F.when(role == "cursor", F.col("cursor"))
        .when(role == "compacted", F.lit(COMPACTION_CURSOR))
        .when(role == "delayed_bucket", F.url_encode(F.col("delayed_index_cursor")))
    )
