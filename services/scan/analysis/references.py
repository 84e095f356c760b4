"""What references each ledger id, and how the ledgers are joined with it.

A ledger id that *any* reference names (any ML list, shadow lists included, any cursor's
cursorsLedgerId, any schema locator, a CompactedTopicLedger property, a delayed-index bucket
property) is referenced. Each kind of reference is one bit (`REF_BITS`); a ledger's
`ref_bits` are the bits of every reference naming it, null when none does.

Two ways to bring them to the ledgers, with the same result (`tests/scan/test_references.py`):

- **Bitmaps** (`ReferenceBitmaps`), when ledger ids are dense, as BookKeeper allocates them:
  one row per block of `BLOCK_IDS` consecutive ids that holds a reference, with one byte of
  `ref_bits` per id of the block. The blocks are few (2,443 for ten million ledgers, 10 MB)
  and are broadcast: each ledger finds its byte by its id, and the ledgers are never
  shuffled. Aggregating the references per block is also much cheaper than per ledger (a
  few thousand groups instead of millions).
- **Rows** (`ledger_references`, one per referenced ledger, joined by shuffling both sides),
  when the ids are too sparse for the blocks to fit a broadcast (`MAX_BITMAP_BLOCKS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from services.scan.analysis.cursor_owned import COMPACTED_TOPIC_LEDGER, DELAYED_BUCKET_PREFIX

#: One bit per kind of reference; aggregating ints is much cheaper than sets of names.
REF_BITS = {
    "ml_list": 1,
    "ml_list_bookkeeper_deleted": 2,
    "cursor": 4,
    "compacted": 8,
    "delayed_bucket": 16,
    "schema_locator": 32,
}
#: Every reference but "listed as bookkeeperDeleted" keeps the BookKeeper copy in use.
LIVE_BITS = sum(REF_BITS.values()) - REF_BITS["ml_list_bookkeeper_deleted"]
#: Stands for a time that is not known; far in the future, so the age is negative (young).
UNKNOWN_TIME_MS = 2**62

#: Ids per bitmap block (a power of two: the block is the id's high bits, the byte its low).
BLOCK_SHIFT = 12
BLOCK_IDS = 1 << BLOCK_SHIFT
#: The most blocks broadcast (4 KiB each: 128 MiB, ids spread over half a billion values).
#: Sparser ids take the shuffled join of one row per ledger.
MAX_BITMAP_BLOCKS = 32_768

# A block's bytes pass through a string (below), exact only for ASCII bytes: the bits of
# every kind of reference must fit in seven.
assert max(REF_BITS.values()) < 128


def _ref(df: DataFrame, ledger_id: Column, name: str) -> DataFrame:
    return df.select(
        ledger_id.cast("long").alias("ledger_id"),
        F.lit(REF_BITS[name]).alias("ref_bit"),
        F.lit(None).cast("long").alias("bk_deleted_mtime_ms"),
    )


#: The names of the references set in each combination of bits, in REF_BITS order and
#: joined by commas, indexed by the bits themselves.
_NAMES_BY_BITS = [
    ",".join(name for name, bit in REF_BITS.items() if bits & bit)
    for bits in range(2 ** len(REF_BITS))
]


def ref_names(bits: Column) -> Column:
    """The names of the references set in `bits`, comma-separated in REF_BITS order
    (`ml_list,cursor`; null when there is none).

    One lookup in a constant array per row. A string, not an array of names: written for
    every one of ten million ledgers, Parquet's nested encoding of a one-name list cost
    seconds of CPU, and an array built and filtered per row (a lambda, evaluated outside
    the generated code) cost more."""
    table = F.array(*[F.lit(names) for names in _NAMES_BY_BITS])
    return F.get(table, bits)


def _bk_deleted() -> Column:
    """An ML list entry whose offload is complete and whose BookKeeper copy is deleted."""
    return F.coalesce(F.col("offload_complete"), F.lit(False)) & F.coalesce(
        F.col("offload_bookkeeper_deleted"), F.lit(False)
    )


def bk_deleted_times(managed_ledgers: DataFrame, ml_ledgers: DataFrame) -> DataFrame:
    """`ledger_id`, `bk_deleted_mtime_ms` of the ledgers an ML list names as offloaded and
    deleted from BookKeeper (`offload_complete` and `bookkeeperDeleted`): the newest mtime
    of an ML listing it so (the flag was set no later than that)."""
    gone = ml_ledgers.filter(_bk_deleted())
    # An unknown mtime (ML znode absent from the extract) must not read as "old".
    mtime = F.coalesce(F.col("znode_mtime_ms"), F.lit(UNKNOWN_TIME_MS))
    return (
        _valid(gone.join(managed_ledgers.select("ml_name", "znode_mtime_ms"), "ml_name", "left"))
        .groupBy("ledger_id")
        .agg(F.max(mtime).alias("bk_deleted_mtime_ms"))
    )


def reference_rows(
    ml_ledgers: DataFrame, cursors: DataFrame, schemas: DataFrame, deleted: DataFrame
) -> DataFrame:
    """One row per reference: `ledger_id`, `ref_bit`, and `bk_deleted_mtime_ms` for the
    ledgers `deleted` names (`bk_deleted_times`), listed as offloaded and deleted."""
    listed = ml_ledgers.filter(~_bk_deleted())
    bk_deleted = deleted.select(
        "ledger_id",
        F.lit(REF_BITS["ml_list_bookkeeper_deleted"]).alias("ref_bit"),
        "bk_deleted_mtime_ms",
    )
    return _valid(
        _ref(listed, F.col("ledger_id"), "ml_list")
        .unionByName(_cursor_refs(cursors))
        .unionByName(_schema_refs(schemas))
    ).unionByName(bk_deleted)


def _valid(refs: DataFrame) -> DataFrame:
    return refs.filter(F.col("ledger_id").isNotNull() & (F.col("ledger_id") >= 0))


def _cursor_refs(cursors: DataFrame) -> DataFrame:
    own = _ref(cursors, F.col("cursors_ledger_id"), "cursor")
    compacted = _ref(cursors, F.col("properties")[COMPACTED_TOPIC_LEDGER], "compacted").unionByName(
        _ref(cursors, F.col("position_properties")[COMPACTED_TOPIC_LEDGER], "compacted")
    )
    entries = cursors.select(F.explode("cursor_properties").alias("key", "value"))
    buckets = _ref(
        entries.filter(F.col("key").startswith(DELAYED_BUCKET_PREFIX)),
        F.expr("try_cast(value AS BIGINT)"),
        "delayed_bucket",
    )
    return own.unionByName(compacted).unionByName(buckets)


def _schema_refs(schemas: DataFrame) -> DataFrame:
    entries = schemas.select(F.explode("index").alias("entry"))
    return _ref(entries, F.col("entry.ledger_id"), "schema_locator")


def ledger_references(rows: DataFrame) -> DataFrame:
    """One row per referenced ledger id of the `reference_rows`: `ref_bits`, `live`,
    `bk_deleted_mtime_ms`.

    `live` is false when the only references are ML list entries whose offload is complete
    and `bookkeeperDeleted`: the BookKeeper copy of such a ledger is garbage.
    """
    return (
        rows.groupBy("ledger_id")
        .agg(
            F.bit_or("ref_bit").alias("ref_bits"),
            F.max("bk_deleted_mtime_ms").alias("bk_deleted_mtime_ms"),
        )
        .withColumn("live", _live(F.col("ref_bits")))
    )


def _live(bits: Column) -> Column:
    return bits.bitwiseAND(LIVE_BITS) != 0


def _block(ledger_id: Column) -> Column:
    return F.shiftright(ledger_id, BLOCK_SHIFT)


def _offset(ledger_id: Column) -> Column:
    return ledger_id.bitwiseAND(BLOCK_IDS - 1)


def reference_bitmaps(rows: DataFrame) -> DataFrame:
    """One row per block of ids holding a reference: `ref_block` and `ref_bytes`, an array
    of `BLOCK_IDS` bytes whose byte i holds the `ref_bits` of id `ref_block * BLOCK_IDS + i`
    (0 when nothing references it).

    `bitmap_construct_agg` sets bit `8 * i + b` of a 4 KiB bitmap for bit b of id i. The
    broadcast side must be an array: a ledger reads its byte from an array in place, where a
    binary value is copied whole for every row that reads it. The bytes become the array
    through a string of one character per byte, exact since every byte is ASCII (below 128).
    """
    bit_index = F.log2(F.col("ref_bit")).cast("int")
    bitmaps = rows.groupBy(_block(F.col("ledger_id")).alias("ref_block")).agg(
        F.bitmap_construct_agg(_offset(F.col("ledger_id")) * 8 + bit_index).alias("bitmap")
    )
    as_bytes = F.transform(
        F.split(F.col("bitmap").cast("string"), ""), lambda char: F.ascii(char).cast("tinyint")
    )
    return bitmaps.select("ref_block", as_bytes.alias("ref_bytes"))


@dataclass(frozen=True)
class References:
    """The references of one analysis, ready to join: `rows` (`reference_rows`), the
    `deleted` ledgers' times (`bk_deleted_times`), and `bitmaps` (at most
    `MAX_BITMAP_BLOCKS` rows) when the ids are dense enough, else None and `rows` are
    joined per ledger. `release` frees what is cached once the findings are written."""

    rows: DataFrame
    deleted: DataFrame
    bitmaps: DataFrame | None

    def release(self) -> None:
        for cached in (self.deleted, self.bitmaps):
            if cached is not None:
                cached.unpersist()


def references(
    managed_ledgers: DataFrame,
    ml_ledgers: DataFrame,
    cursors: DataFrame,
    schemas: DataFrame,
    *,
    max_blocks: int | None = None,
) -> References:
    """The references, with the way to join them chosen by counting the bitmap blocks:
    bitmaps up to `max_blocks` blocks (default `MAX_BITMAP_BLOCKS`).

    Two small Spark jobs: the deleted ledgers' times and the bitmaps are computed and
    cached. Cached, the times are joined as what they are, a broadcast when few: estimated
    from the plan, their size was that of the ML lists joined with the MLs, and the join
    shuffled every ledger."""
    limit = MAX_BITMAP_BLOCKS if max_blocks is None else max_blocks
    deleted = bk_deleted_times(managed_ledgers, ml_ledgers).persist()
    deleted.count()
    rows = reference_rows(ml_ledgers, cursors, schemas, deleted)
    bitmaps = reference_bitmaps(rows).persist()
    if bitmaps.count() <= limit:
        return References(rows, deleted, bitmaps)
    bitmaps.unpersist()
    return References(rows, deleted, None)


def join_references(ledgers: DataFrame, refs: References) -> DataFrame:
    """`ledgers` with `ref_bits` (null when nothing references the ledger), `live` (a
    reference other than "listed as bookkeeperDeleted" names it) and `bk_deleted_mtime_ms`."""
    if refs.bitmaps is None:
        # The hint hashes the references (one narrow row per referenced ledger): left to
        # adaptive execution, the join hashed the wide ledger rows.
        return ledgers.join(ledger_references(refs.rows).hint("shuffle_hash"), "ledger_id", "left")
    ledger_id = F.col("ledger_id")
    blocks = F.broadcast(refs.bitmaps)
    byte = F.get(F.col("ref_bytes"), _offset(ledger_id).cast("int")).cast("int")
    joined = ledgers.join(blocks, _block(ledger_id) == F.col("ref_block"), "left").select(
        *ledgers.columns, F.when(byte != 0, byte).alias("ref_bits")
    )
    # Only a ledger listed as offloaded and deleted from BookKeeper looks its time up (few,
    # usually: Pulsar deletes the BookKeeper copy it marks so).
    deleted = F.col("ref_bits").bitwiseAND(REF_BITS["ml_list_bookkeeper_deleted"]) != 0
    times = refs.deleted.withColumnRenamed("ledger_id", "_deleted_id")
    return (
        joined.join(times, F.when(deleted, ledger_id) == F.col("_deleted_id"), "left")
        .drop("_deleted_id")
        .withColumn("live", _live(F.col("ref_bits")))
    )
