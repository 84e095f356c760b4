"""Classification of every ledger and offloaded object (pure DataFrame → DataFrame).

A ledger id that *any* reference names (any ML list, shadow lists included, any cursor's
cursorsLedgerId, any schema locator, a CompactedTopicLedger property, a delayed-index bucket
property) is `referenced`, whatever its own custom metadata says. Only what nothing
references is classified further, by the reference owner its custom metadata names.

Kinds of a ledger finding:
- `unreadable`: the metadata znode could not be decoded (never deleted).
- `referenced`.
- `unknown_ownership`: no Pulsar custom metadata, or a component this code does not know.
- `in_use_open`: OPEN or IN_RECOVERY, unreferenced, its owner (topic, schema) still exists,
  and inside the age window: a rollover or cursor switch may be about to reference it. Older
  than the window it is an orphan like any other (the OPEN rule, docs/design.md §4: Pulsar deletes
  old cursor ledgers without closing them, so an unlinked ledger is often OPEN).
- `reference_unknown`: a compacted ledger of a topic whose `__compaction` cursor is active
  and whose live CompactedTopicLedger (in the cursor ledger) was not read, unless its id is
  below the value the cursor znode persisted (`services.scan.analysis.cursor_owned`).
- `too_young`: an orphan inside the age window (`orphan_reason` says which).
- orphans: `topic_gone`, `not_in_list`, `cursor_moved_on`, `schema_not_in_locator`,
  `bk_copy_after_offload`, `compacted_unreferenced` (no cursor property names it),
  `bucket_unreferenced` (no cursor property names it). A compacted or bucket ledger of a
  deleted topic is `topic_gone`, as a data or cursor ledger is.
Kinds of an object finding: `unknown_ownership` (key not Pulsar's, or an object without
owner metadata whose ledger no ML lists), `referenced`, `other_cluster`, `too_young`,
`offload_no_match`.
Before any orphan kind, `services.scan.analysis.sharing` sets apart what may be another
cluster's on a shared BookKeeper: `neighbour_owner`, `unknown_namespace`,
`replicated_undeclared` (never deletable).
`services.scan.analysis.canonical` then turns deletable findings whose owner names are not
canonical into `noncanonical_name` (never deletable).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from services.scan.analysis import sharing as S
from services.scan.analysis.cursor_owned import below_persisted, compaction_state, owner_cursor
from services.scan.analysis.names import (
    UNKNOWN_NAMESPACE,
    ml_name_of_topic,
    namespace_of_ml,
    namespace_of_schema,
    namespace_of_schema_id,
)
from services.scan.analysis.references import References, join_references, ref_names

DELETABLE_KINDS = (
    "topic_gone",
    "not_in_list",
    "cursor_moved_on",
    "schema_not_in_locator",
    "bk_copy_after_offload",
    "offload_no_match",
    "compacted_unreferenced",
    "bucket_unreferenced",
)
#: Ledger roles a PDLI can name, and the PDLI component for each.
PDLI_COMPONENTS = {
    "data": "MANAGED_LEDGER",
    "cursor": "MANAGED_CURSOR",
    "schema": "SCHEMA_STORAGE",
    "compacted": "COMPACTED_LEDGER",
    "delayed_bucket": "DELAYED_INDEX_BUCKET",
}
OPEN_STATES = ("OPEN", "IN_RECOVERY")


def reference_owners(
    managed_ledgers: DataFrame, cursors: DataFrame, schemas: DataFrame
) -> DataFrame:
    """Existing owners keyed `M:<ml_name>` and `S:<schema_id>`, with `compaction_unknown`
    and `compaction_floor` (`services.scan.analysis.cursor_owned.compaction_state`)."""
    mls = (
        managed_ledgers.select("ml_name")
        .distinct()
        .join(compaction_state(cursors), "ml_name", "left")
        .select(
            F.concat(F.lit("M:"), "ml_name").alias("owner_key"),
            F.coalesce("compaction_unknown", F.lit(False)).alias("compaction_unknown"),
            "compaction_floor",
        )
    )
    locators = schemas.select(
        F.concat(F.lit("S:"), "schema_id").alias("owner_key"),
        F.lit(False).alias("compaction_unknown"),
        F.lit(None).cast("long").alias("compaction_floor"),
    ).distinct()
    return mls.unionByName(locators)


def _ledger_role() -> Column:
    component, ml = F.col("component"), F.col("managed_ledger")
    return (
        F.when(
            (component == "managed-ledger") & ml.isNotNull() & F.col("cursor").isNotNull(), "cursor"
        )
        .when((component == "managed-ledger") & ml.isNotNull(), "data")
        .when((component == "schema") & F.col("schema_id").isNotNull(), "schema")
        .when((component == "compacted-ledger") & F.col("owner_ml").isNotNull(), "compacted")
        # Its owner is the subscription's cursor: without the cursor's name (Pulsar writes
        # all the bucket keys together) no PDLI can name it.
        .when(
            (component == "delayed-index-bucket")
            & F.col("owner_ml").isNotNull()
            & F.col("delayed_index_cursor").isNotNull(),
            "delayed_bucket",
        )
    )


def _owner_ml() -> Column:
    component = F.col("component")
    # One topic-name conversion, of whichever topic the component names: written out per
    # component, the conversion's code appeared twice in the stage that reads the ledgers.
    topic = F.when(component == "compacted-ledger", F.col("compacted_topic")).when(
        component == "delayed-index-bucket", F.col("delayed_index_topic")
    )
    return F.when(component == "managed-ledger", F.col("managed_ledger")).otherwise(
        ml_name_of_topic(topic)
    )


def _status_kind() -> Column:
    """The kind of a ledger that is not an orphan, else null."""
    return (
        F.when(F.col("decode_error").isNotNull(), "unreadable")
        .when(F.coalesce(F.col("live"), F.lit(False)), "referenced")
        .when(~F.coalesce(F.col("has_pulsar_metadata"), F.lit(False)), "unknown_ownership")
        .when(F.col("ref_bits").isNotNull(), None)  # listed only as bookkeeperDeleted: orphan
        .when(F.col("role").isNull(), "unknown_ownership")
        .when(
            (F.col("role") == "compacted")
            & F.col("compaction_unknown")
            & ~below_persisted(F.col("ledger_id"), F.col("compaction_floor")),
            "reference_unknown",
        )
    )


def _orphan_reason() -> Column:
    role = F.col("role")
    return (
        F.when(F.col("ref_bits").isNotNull(), "bk_copy_after_offload")
        .when(role == "schema", "schema_not_in_locator")
        .when(~F.col("owner_exists"), "topic_gone")
        .when(role == "data", "not_in_list")
        .when(role == "cursor", "cursor_moved_on")
        .when(role == "compacted", "compacted_unreferenced")
        .when(role == "delayed_bucket", "bucket_unreferenced")
    )


def _no_sharing(df: DataFrame) -> DataFrame:
    """The sharing columns, empty: an analysis told nothing of other clusters."""
    return (
        df.withColumn("owner_namespace", F.lit(None).cast("string"))
        .withColumn("neighbour_cluster", F.lit(None).cast("string"))
        .withColumn("undeclared_replicas", F.lit(None).cast("array<string>"))
        .withColumn("namespace_known", F.lit(None).cast("boolean"))
    )


def _sharing_columns(
    df: DataFrame, owner_key: Column, owner_namespace: Column, sharing: S.SharingFrames | None
) -> DataFrame:
    return (
        _no_sharing(df) if sharing is None else S.annotate(df, owner_key, owner_namespace, sharing)
    )


def _stage_boundary(df: DataFrame, name: str) -> DataFrame:
    """`df`, its rows counted by an operator that generates no code, so that the code Spark
    generates for what comes before and after it is compiled as two methods.

    The reading of the ledgers, their references (broadcast) and the classification would
    otherwise be one generated method of about 11,500 bytes, which HotSpot never compiles
    (`HugeMethodLimit`, 8,000 bytes): every ledger would run through the bytecode
    interpreter. Split here, the two are about 6,300 and 5,900 bytes at ten million
    ledgers (`tests/scan/test_classify_plan.py`). The count costs an addition per row."""
    return df.observe(name, F.count(F.lit(1)).alias("rows"))


def classify_ledgers(
    bk_ledgers: DataFrame,
    references: References,
    owners: DataFrame,
    *,
    now_ms: int,
    min_age_ms: int,
    sharing: S.SharingFrames | None = None,
) -> DataFrame:
    """One finding per BookKeeper ledger (see the module docstring for the kinds).

    Age is measured from the later of the metadata ctime and the znode ctime; an unknown
    age counts as young. A `bk_copy_after_offload` ledger's age also counts from the mtime
    of the ML that lists it, since the flag may have been set just before the scan.
    """
    created = F.greatest("ctime_ms", "znode_ctime_ms")
    owned = bk_ledgers.select("*", _owner_ml().alias("owner_ml"))
    # A referenced ledger is `referenced` whatever its owner: its owner is not looked up
    # (no key, `owner_exists` and `owner_namespace` null), and most ledgers skip both joins.
    referenced = F.coalesce(F.col("live"), F.lit(False))
    owner_key = (
        F.when(referenced, F.lit(None).cast("string"))
        .when(F.col("role") == "schema", F.concat(F.lit("S:"), "schema_id"))
        .otherwise(F.concat(F.lit("M:"), "owner_ml"))
    )
    # The owner key is made after the join with the references: made before, a shuffle of
    # every ledger to that join (sparse ids, `join_references`) carried it beside the owner
    # ML it repeats.
    joined = join_references(owned.select("*", _ledger_role().alias("role")), references)
    ledgers = (
        _stage_boundary(joined, "ledgers_with_references")
        .select("*", owner_key.alias("owner_key"))
        .join(owners.withColumn("owner_exists", F.lit(True)), "owner_key", "left")
    )
    ledgers = ledgers.select(
        *[c for c in ledgers.columns if c not in ("owner_exists", "compaction_unknown")],
        F.when(~referenced, F.coalesce("owner_exists", F.lit(False))).alias("owner_exists"),
        F.coalesce("compaction_unknown", F.lit(False)).alias("compaction_unknown"),
        F.greatest(created, "bk_deleted_mtime_ms").alias("created_ms"),
    ).withColumn("age_ms", F.lit(now_ms) - F.col("created_ms"))
    # The namespace is cut from the names of the few ledgers that are not referenced.
    role = F.col("role")
    owner_namespace = (
        F.when(referenced, F.lit(None).cast("string"))
        .when(role == "schema", namespace_of_schema_id(F.col("schema_id")))
        .when(role.isNotNull(), namespace_of_ml(F.col("owner_ml")))
    )
    ledgers = _sharing_columns(ledgers, F.col("owner_key"), owner_namespace, sharing)
    return _decide(ledgers, min_age_ms=min_age_ms, sharing=sharing)


def _decide(ledgers: DataFrame, *, min_age_ms: int, sharing: S.SharingFrames | None) -> DataFrame:
    """The kind of each joined ledger, in steps the optimizer keeps apart.

    `status` and `kind` are large CASE expressions that several columns read. Written as
    one expression each and read by name from the next step, every step refers to its
    predecessor's column more than once, which is what stops `CollapseProject` from merging
    the steps (it inlines only an expression read once or a cheap one): each CASE is
    evaluated once per row. Inlined into each reader, the classification stage's generated
    per-row method grew past the 8,000 bytes HotSpot compiles, and every row ran in the
    bytecode interpreter (`tests/scan/test_classify_plan.py` keeps it so)."""
    young = F.col("age_ms").isNull() | (F.col("age_ms") < min_age_ms)
    # The OPEN rule: state matters only inside the age window, where an OPEN ledger of an
    # existing owner may be a rollover or cursor switch whose reference is not written yet
    # (not an orphan, not counted as one). Older, it is judged like a closed ledger.
    opening = young & F.col("state").isin(*OPEN_STATES) & F.col("owner_exists")
    foreign = _foreign(F.col("owner_exists"), sharing)
    status = F.coalesce(_status_kind(), foreign, F.when(opening, "in_use_open"))
    pdli = F.lit(None).cast("string")
    for role, component in PDLI_COMPONENTS.items():
        pdli = F.when(F.col("role") == role, component).otherwise(pdli)
    judged = ledgers.select("*", status.alias("status"))
    explained = judged.select(
        "*",
        F.when(F.col("status").isNull(), _orphan_reason()).alias("orphan_reason"),
        pdli.alias("pdli_component"),
    )
    kind = F.coalesce(
        F.col("status"),
        # Listed by one of our lists (ids are unique on one ledgers root): ours, whatever
        # other cluster has the topic.
        F.when(S.replicated_undeclared() & F.col("ref_bits").isNull(), S.REPLICATED_UNDECLARED),
        F.when(young, "too_young").otherwise(F.col("orphan_reason")),
    )
    return explained.select("*", kind.alias("kind")).select(
        "ledger_id",
        "kind",
        "orphan_reason",
        (F.col("kind").isin(*DELETABLE_KINDS) & F.col("pdli_component").isNotNull()).alias(
            "deletable"
        ),
        "role",
        "component",
        "pdli_component",
        "state",
        F.col("owner_ml").alias("ml_name"),
        owner_cursor().alias("cursor_name"),
        "schema_id",
        # Only findings that are not referenced are grouped by namespace; splitting the
        # names of millions of referenced ledgers would be wasted work.
        F.when(
            F.col("kind") != "referenced",
            F.coalesce(
                F.when(F.col("role") == "schema", namespace_of_schema(F.col("schema_id"))),
                namespace_of_ml(F.col("owner_ml")),
                F.lit(UNKNOWN_NAMESPACE),
            ),
        ).alias("namespace"),
        F.coalesce("length", F.lit(0)).alias("size_bytes"),
        "created_ms",
        "age_ms",
        "owner_exists",
        ref_names(F.col("ref_bits")).alias("refs"),
        "znode_version",
        *SHARING_COLUMNS,
    )


#: What the findings say of sharing: the namespace the owner check used, the declared
#: neighbour owning the ledger, the undeclared clusters its namespace replicates to.
SHARING_COLUMNS = ("owner_namespace", "neighbour_cluster", "undeclared_replicas")


def _foreign(owner_exists: Column, sharing: S.SharingFrames | None) -> Column:
    if sharing is None:
        return F.lit(None).cast("string")
    return S.foreign_kind(owner_exists, sharing.sharing)


def classify_objects(
    offload_objects: DataFrame,
    ml_ledgers: DataFrame,
    *,
    cluster: str,
    now_ms: int,
    min_age_ms: int,
    owners: DataFrame | None = None,
    sharing: S.SharingFrames | None = None,
) -> DataFrame:
    """One finding per offloaded object.

    An object is referenced only when some ML lists its ledger *with the same uuid*: the
    objects of an earlier, abandoned upload of a still-listed ledger are orphans. The match
    ignores the bucket, as the verifier's in-use check does: a context written by Pulsar 2.1
    names no bucket (the operator's default applies), and its objects stay referenced in
    whichever bucket they sit.

    Objects written before Pulsar 2.10 name no owner (`managedledgername`). One whose ledger
    no ML lists under any uuid has no owner to put in a PDLI, and the verifier would want a
    proof of ownership that a reconciler intent cannot give: `unknown_ownership`, reported
    and never proposed.

    With `sharing` (and this cluster's `owners`, `reference_owners`), an unreferenced object
    of a managed ledger that only a declared neighbour has, of a namespace unknown here, or of
    one replicated to an undeclared cluster is set apart as for ledgers.
    """
    listed = (
        ml_ledgers.filter(F.col("offload_uuid").isNotNull())
        .groupBy("ledger_id")
        .agg(
            F.collect_set(F.lower("offload_uuid")).alias("listed_uuids"),
            F.min("ml_name").alias("listed_ml"),
        )
    )
    parsed = F.col("ledger_id").isNotNull() & F.col("uuid").isNotNull()
    matched = F.coalesce(F.array_contains("listed_uuids", F.lower("uuid")), F.lit(False))
    ml_name = F.coalesce("managed_ledger_name", "listed_ml")
    # Each object's namespace is cut once; a referenced object's owner is not looked up
    # (no owner key or owner namespace), as for ledgers.
    objects = offload_objects.join(listed, "ledger_id", "left").select(
        "*", (parsed & matched).alias("_referenced"), namespace_of_ml(ml_name).alias("_namespace")
    )
    referenced = F.col("_referenced")
    owner_key = F.when(~referenced, F.concat(F.lit("M:"), ml_name))
    owner_namespace = F.when(~referenced, F.col("_namespace"))
    objects = _sharing_columns(objects, owner_key, owner_namespace, sharing)
    if owners is not None:
        present = owners.select(F.col("owner_key").alias("_okey"), F.lit(True).alias("_exists"))
        objects = objects.join(present, owner_key == F.col("_okey"), "left").drop("_okey")
    else:
        objects = objects.withColumn("_exists", F.lit(None).cast("boolean"))
    owner_exists = F.coalesce(F.col("_exists"), F.lit(False))
    held = F.coalesce(_foreign(owner_exists, sharing), F.lit(None).cast("string"))
    foreign = F.col("cluster_name").isNotNull() & (F.col("cluster_name") != cluster)
    age = F.lit(now_ms) - F.col("last_modified_ms")
    young = age.isNull() | (age < min_age_ms)
    # Written before 2.10: neither owner key (both arrived together, PR #14907).
    pre_210 = F.col("managed_ledger_name").isNull() & F.col("cluster_name").isNull()
    ownerless = pre_210 & F.col("listed_ml").isNull()
    unheld = parsed & ~referenced & ~foreign & ~ownerless & held.isNull()
    orphan = F.when(unheld, "offload_no_match")
    kind = (
        F.when(~parsed, "unknown_ownership")
        .when(referenced, "referenced")
        .when(foreign, "other_cluster")
        .when(ownerless, "unknown_ownership")
        .when(held.isNotNull(), held)
        # An object naming our cluster is ours; one naming none (before 2.10, or not read
        # with HEAD) may be the other cluster's upload of the same topic.
        .when(S.replicated_undeclared() & F.col("cluster_name").isNull(), S.REPLICATED_UNDECLARED)
        .when(young, "too_young")
        .otherwise("offload_no_match")
    )
    return objects.select(
        "bucket",
        "key",
        "ledger_id",
        "uuid",
        "role",
        kind.alias("kind"),
        orphan.alias("orphan_reason"),
        (kind == "offload_no_match").alias("deletable"),
        ml_name.alias("ml_name"),
        F.coalesce("_namespace", F.lit(UNKNOWN_NAMESPACE)).alias("namespace"),
        F.col("listed_uuids").isNotNull().alias("ledger_listed"),
        "cluster_name",
        F.coalesce("size", F.lit(0)).alias("size_bytes"),
        F.col("last_modified_ms").alias("created_ms"),
        age.alias("age_ms"),
        *SHARING_COLUMNS,
    )
