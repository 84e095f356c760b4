"""A small hand-built extract with one planted case of every kind, and look-alikes.

Ids below 2147483647 use BookKeeper's short path layout, ids from 4294967296 the long one.
"""

from __future__ import annotations

from typing import Any

NOW = 1_700_000_000_000
DAY = 86_400_000
OLD = NOW - 10 * DAY
YOUNG = NOW - DAY
CLUSTER = "c1"
LONG = 4_294_967_296

LIVE = "public/default/persistent/live"
GONE = "public/default/persistent/deleted-topic"
SOURCE = "public/default/persistent/source"
SHADOW = "public/default/persistent/shadow"
OFFL = "public/default/persistent/offl"
COMPACTED = "t2/ns2/persistent/compacted"
COMPACTING = "t2/ns2/persistent/compacting"
DELAYED = "t2/ns2/persistent/delayed"
RECENT = "public/default/persistent/offl-recent"
COMPACTING2 = "t2/ns2/persistent/compacting2"
COMPACTING3 = "t2/ns2/persistent/compacting3"
COMPACTED_GONE = "t2/ns2/persistent/compacted-gone"
DELAYED_GONE = "t2/ns2/persistent/delayed-gone"

U0 = "00000000-0000-0000-0000-000000000000"
U1 = "11111111-1111-1111-1111-111111111111"
U2 = "22222222-2222-2222-2222-222222222222"
U7 = "77777777-7777-7777-7777-777777777777"
U8 = "88888888-8888-8888-8888-888888888888"
U9 = "99999999-9999-9999-9999-999999999999"

Row = dict[str, Any]


def bk(ledger_id: int, *, created: int = OLD, state: str = "CLOSED", **meta: Any) -> Row:
    """A ledger; `meta` holds custom-metadata columns (application defaults to pulsar)."""
    row: Row = {
        "ledger_id": ledger_id,
        "subtree": "/ledgers/000" if ledger_id >= 2147483647 else "/ledgers/00",
        "state": state,
        "length": 1000 + ledger_id % 1000,
        "last_entry_id": 9,
        "ensemble_size": 2,
        "znode_ctime_ms": created,
        "znode_mtime_ms": created,
        "znode_version": 1,
        "metadata_format_version": 3,
    }
    row.update({"application": "pulsar"} | meta)
    row["has_pulsar_metadata"] = row["application"] == "pulsar"
    return row


def data(ledger_id: int, ml: str, **kw: Any) -> Row:
    return bk(ledger_id, component="managed-ledger", managed_ledger=ml, **kw)


def cursor_ledger(ledger_id: int, ml: str, cursor: str, **kw: Any) -> Row:
    return bk(ledger_id, component="managed-ledger", managed_ledger=ml, cursor=cursor, **kw)


def ml(name: str, *, mtime: int = NOW - 3_600_000, **kw: Any) -> Row:
    tenant, namespace, domain, local = name.split("/")
    return {
        "ml_name": name,
        "tenant": tenant,
        "namespace": namespace,
        "domain": domain,
        "local_name": local,
        "znode_version": 5,
        "znode_ctime_ms": OLD - DAY,
        "znode_mtime_ms": mtime,
        "properties": {},
    } | kw


def listed(name: str, ledger_id: int, position: int, **kw: Any) -> Row:
    return {
        "ml_name": name,
        "ledger_id": ledger_id,
        "position": position,
        "entries": 10,
        "size": 1000,
        "timestamp_ms": OLD,
        "offloaded": False,
    } | kw


def offloaded(uuid: str, *, bk_deleted: bool) -> Row:
    return {
        "offloaded": True,
        "offload_uuid": uuid,
        "offload_complete": True,
        "offload_bookkeeper_deleted": bk_deleted,
        "offload_timestamp_ms": OLD,
        "offload_driver_name": "aws-s3",
        "offload_bucket": "b1",
    }


def cursor(name: str, cursor_name: str, ledger_id: int, **kw: Any) -> Row:
    return {
        "ml_name": name,
        "cursor_name": cursor_name,
        "cursors_ledger_id": ledger_id,
        "last_active_ms": NOW - 3_600_000,
        "properties": {},
        "cursor_properties": {},
        "position_properties": {},
    } | kw


def obj(
    key: str, *, uuid: str | None, ledger_id: int | None, modified: int = OLD, **kw: Any
) -> Row:
    return {
        "bucket": "b1",
        "key": key,
        "ledger_id": ledger_id,
        "uuid": uuid,
        "role": None if uuid is None else ("index" if key.endswith("-index") else "data"),
        "size": 5000,
        "last_modified_ms": modified,
        "cluster_name": CLUSTER,
    } | kw


def pair(uuid: str, ledger_id: int, **kw: Any) -> list[Row]:
    """The data and index objects of one offload."""
    base = f"{uuid}-ledger-{ledger_id}"
    return [
        obj(base, uuid=uuid, ledger_id=ledger_id, **kw),
        obj(base + "-index", uuid=uuid, ledger_id=ledger_id, **kw),
    ]


def topic_of(ml_name: str) -> str:
    """`t/ns/persistent/x` → `persistent://t/ns/x` (plain local names only)."""
    tenant, namespace, domain, local = ml_name.split("/")
    return f"{domain}://{tenant}/{namespace}/{local}"


def compacted(ledger_id: int, ml_name: str, **kw: Any) -> Row:
    """A compacted-topic ledger as `AbstractTwoPhaseCompactor.phaseTwo` creates it, with the
    custom metadata of `LedgerMetadataUtils.buildMetadataForCompactedLedger` (Pulsar 2.3+):
    `component` `compacted-ledger`, `pulsar/compactedTopic` the full topic name."""
    return bk(ledger_id, component="compacted-ledger", compacted_topic=topic_of(ml_name), **kw)


def bucket(ledger_id: int, ml_name: str, subscription: str, **kw: Any) -> Row:
    """A delayed-delivery bucket snapshot as `BookkeeperBucketSnapshotStorage` creates it
    (PIP-195, 3.0+): `pulsar/delayedIndexTopic` the full topic name, `pulsar/delayedIndexCursor`
    the subscription as the broker knows it (decoded)."""
    return bk(
        ledger_id,
        component="delayed-index-bucket",
        delayed_index_topic=topic_of(ml_name),
        delayed_index_cursor=subscription,
        **kw,
    )


def cursor_owned_ledgers() -> list[Row]:
    """Compacted ledgers and bucket snapshots nothing references any more, next to ones still
    referenced (`cursor_owned_cursors`).

    - 39: `CompactedTopicImpl.newCompactedLedger` deleted the previous compacted ledger after
      the `__compaction` cursor moved to 40, and that delete failed.
    - 41 (planted above), 42: a broker crashed between creating the new ledger in
      `TwoPhaseCompactor.phaseTwo` and its `cursor.markDelete(pos, props)`.
    - 43: the topic was deleted, its compacted ledger left behind (`PersistentTopic.delete`
      does not delete it).
    - 75, 77: the `__compaction` cursor of COMPACTING3 is active; its znode persisted
      `CompactedTopicLedger` 76. 75 is below it (no longer referenced), 77 is not (the live
      value in the cursor ledger was not read).
    - buckets: a merge or cursor deletion in `BucketDelayedDeliveryTracker` removed the cursor
      property, then the ledger delete failed (fixed in 3.0.8 / 3.3.3); one of a
      subscription whose name `Codec.encode` changes; one of a deleted topic; one young.
    """
    return [
        compacted(39, COMPACTED),
        compacted(42, COMPACTED),
        compacted(43, COMPACTED_GONE),
        compacted(44, COMPACTED, created=YOUNG),
        cursor_ledger(74, COMPACTING3, "__compaction"),
        compacted(75, COMPACTING3),
        compacted(76, COMPACTING3),
        compacted(77, COMPACTING3),
        bucket(LONG + 55, DELAYED, "sub1", delayed_index_bucket_key=f"{BUCKET_KEY}_6_9"),
        bucket(LONG + 56, DELAYED, "my sub"),
        bucket(LONG + 57, DELAYED_GONE, "sub1"),
        bucket(LONG + 58, DELAYED, "sub1", created=YOUNG),
    ]


def cursor_owned_cursors() -> list[Row]:
    """The active `__compaction` cursor of COMPACTING3: its znode keeps the
    `CompactedTopicLedger` of its last close (`ManagedCursorInfo.properties`) while the live
    value sits in its cursor ledger 74 (`PositionInfo.properties`), which was not read."""
    return [
        cursor(
            COMPACTING3,
            "__compaction",
            74,
            properties={"CompactedTopicLedger": 76},
            position_properties=None,
        )
    ]


BUCKET_KEY = "#pulsar.internal.delayed.bucket"


def task(kind: str, status: str = "ok", error: str | None = None) -> Row:
    return {
        "task_id": f"{kind}-0",
        "kind": kind,
        "scope": "/",
        "rows": 1,
        "status": status,
        "error": error,
        "started_ms": NOW,
        "ended_ms": NOW + 1000,
    }


KINDS = ("bk_ledgers", "managed_ledgers", "cursors", "schemas", "offload_objects")
#: The namespaces with policies here (`/admin/policies/<tenant>/<ns>`, Pulsar's
#: `NamespaceResources`): every planted owner's, replicated nowhere else.
NAMESPACES = ("public/default", "t2/ns2")


def namespace(name: str, *replicas: str) -> Row:
    return {"namespace": name, "replication_clusters": [CLUSTER, *replicas]}


def planted_rows() -> dict[str, list[Row]]:
    """The planted extract as plain rows per table."""
    return {
        "bk_ledgers": [
            data(10, LIVE),
            data(LONG + 1, LIVE, state="OPEN", created=NOW - 3_600_000),
            data(20, SOURCE),  # source deleted; the shadow still lists it
            data(30, OFFL),  # complete && bookkeeperDeleted, still in BookKeeper
            data(31, OFFL),
            compacted(40, COMPACTED),
            compacted(41, COMPACTED),
            bucket(LONG + 54, DELAYED, "sub1", delayed_index_bucket_key=f"{BUCKET_KEY}_1_5"),
            cursor_ledger(50, LIVE, "sub-a"),
            cursor_ledger(51, LIVE, "sub-a"),
            cursor_ledger(52, LIVE, "sub-gone"),
            bk(60, component="schema", schema_id="public/default/live"),
            bk(61, component="schema", schema_id="public/default/live"),
            bk(62, component="schema", schema_id="public/default/nolocator"),
            cursor_ledger(70, COMPACTING, "__compaction"),
            compacted(71, COMPACTING),
            data(100, GONE),
            data(LONG + 104, LIVE),
            data(101, LIVE, created=YOUNG),
            # OPEN and unreferenced: an open orphan once older than the window (the OPEN
            # rule); Pulsar deletes old cursor ledgers without closing them
            # (`ManagedCursorImpl.switchToNewLedger`), so 53 is OPEN too.
            data(102, LIVE, state="OPEN"),
            cursor_ledger(53, LIVE, "sub-a", state="OPEN"),
            # A rollover in progress: OPEN, young, its topic exists.
            data(108, LIVE, state="OPEN", created=YOUNG),
            data(109, LIVE, state="IN_RECOVERY", created=YOUNG),
            data(103, GONE, state="OPEN"),
            bk(104, application=None),
            bk(105, component="weird"),
            bk(106, decode_error="truncated protobuf"),
            data(107, GONE, created=None),  # unknown age counts as young
            data(32, RECENT),  # bookkeeperDeleted flag set by a write minutes ago
            data(33, OFFL),  # bookkeeperDeleted in one list, live in another
            cursor_ledger(72, COMPACTING2, "__compaction"),
            compacted(73, COMPACTING2),
            *cursor_owned_ledgers(),
        ],
        "managed_ledgers": [
            ml(LIVE),
            ml(
                SHADOW,
                shadow_source="persistent://public/default/source",
                properties={"PULSAR.SHADOW_SOURCE": "persistent://public/default/source"},
            ),
            ml(OFFL, mtime=OLD),
            ml(COMPACTED),
            ml(COMPACTING),
            ml(DELAYED),
            ml(RECENT, mtime=NOW - 60_000),
            ml(COMPACTING2),
            ml(COMPACTING3),
        ],
        "ml_ledgers": [
            listed(LIVE, 10, 0),
            listed(LIVE, LONG + 1, 1, timestamp_ms=0, entries=0),
            listed(SHADOW, 20, 0),
            listed(OFFL, 30, 0, **offloaded(U1, bk_deleted=True)),
            listed(OFFL, 31, 1, **offloaded(U2, bk_deleted=False)),
            listed(OFFL, 33, 2, **offloaded(U1, bk_deleted=True)),
            listed(LIVE, 33, 2),
            listed(RECENT, 32, 0, **offloaded(U1, bk_deleted=True)),
        ],
        "cursors": [
            cursor(LIVE, "sub-a", 50),
            cursor(COMPACTED, "__compaction", -1, properties={"CompactedTopicLedger": 40}),
            cursor(COMPACTING, "__compaction", 70, position_properties=None),
            # The live CompactedTopicLedger, read from the active cursor's ledger.
            cursor(
                COMPACTING2, "__compaction", 72, position_properties={"CompactedTopicLedger": 73}
            ),
            cursor(
                DELAYED,
                "sub1",
                -1,
                cursor_properties={f"{BUCKET_KEY}_1_5": str(LONG + 54)},
            ),
            *cursor_owned_cursors(),
        ],
        "schemas": [
            {
                "schema_id": "public/default/live",
                "locator_version": 2,
                "index": [{"version": 0, "ledger_id": 60, "entry_id": 0}],
            },
        ],
        "offload_objects": [
            *pair(U2, 31),  # listed with this uuid
            *pair(U0, 31),  # an earlier, abandoned upload of the listed ledger 31
            *pair(U1, 30),
            *pair(U9, LONG + 500),
            *pair(U8, 200, modified=YOUNG),
            obj(f"{U7}-ledger-900", uuid=U7, ledger_id=900),
            obj(f"{U7}-ledger-900-index", uuid=U7, ledger_id=900, modified=YOUNG),
            obj("notes/readme.txt", uuid=None, ledger_id=None),
        ],
        "namespaces": [namespace(name) for name in NAMESPACES],
        "scan_manifest": [task(kind) for kind in (*KINDS, "namespaces")],
        "scan_run": [
            {
                "scan_id": "s1",
                "cluster_name": CLUSTER,
                "started_ms": NOW,
                "ended_ms": NOW + 5000,
                "objects_headed": True,
            }
        ],
    }


#: (ledger_id, kind, orphan_reason, deletable) expected for the planted ledgers.
EXPECTED_LEDGERS = [
    (10, "referenced", None, False),
    (20, "referenced", None, False),
    (30, "bk_copy_after_offload", "bk_copy_after_offload", True),
    (31, "referenced", None, False),
    (32, "too_young", "bk_copy_after_offload", False),
    (33, "referenced", None, False),
    (39, "compacted_unreferenced", "compacted_unreferenced", True),
    (40, "referenced", None, False),
    (41, "compacted_unreferenced", "compacted_unreferenced", True),
    (42, "compacted_unreferenced", "compacted_unreferenced", True),
    (43, "topic_gone", "topic_gone", True),
    (44, "too_young", "compacted_unreferenced", False),
    (50, "referenced", None, False),
    (51, "cursor_moved_on", "cursor_moved_on", True),
    (52, "cursor_moved_on", "cursor_moved_on", True),
    (53, "cursor_moved_on", "cursor_moved_on", True),
    (60, "referenced", None, False),
    (61, "schema_not_in_locator", "schema_not_in_locator", True),
    (62, "schema_not_in_locator", "schema_not_in_locator", True),
    (70, "referenced", None, False),
    (71, "reference_unknown", None, False),
    (72, "referenced", None, False),
    (73, "referenced", None, False),
    (74, "referenced", None, False),
    (75, "compacted_unreferenced", "compacted_unreferenced", True),
    (76, "referenced", None, False),
    (77, "reference_unknown", None, False),
    (100, "topic_gone", "topic_gone", True),
    (101, "too_young", "not_in_list", False),
    (102, "not_in_list", "not_in_list", True),
    (103, "topic_gone", "topic_gone", True),
    (104, "unknown_ownership", None, False),
    (105, "unknown_ownership", None, False),
    (106, "unreadable", None, False),
    (107, "too_young", "topic_gone", False),
    (108, "in_use_open", None, False),
    (109, "in_use_open", None, False),
    (LONG + 1, "referenced", None, False),
    (LONG + 54, "referenced", None, False),
    (LONG + 55, "bucket_unreferenced", "bucket_unreferenced", True),
    (LONG + 56, "bucket_unreferenced", "bucket_unreferenced", True),
    (LONG + 57, "topic_gone", "topic_gone", True),
    (LONG + 58, "too_young", "bucket_unreferenced", False),
    (LONG + 104, "not_in_list", "not_in_list", True),
]

#: (key, kind, deletable) expected for the planted objects.
EXPECTED_OBJECTS = sorted(
    [
        (f"{U2}-ledger-31", "referenced", False),
        (f"{U2}-ledger-31-index", "referenced", False),
        (f"{U0}-ledger-31", "offload_no_match", True),
        (f"{U0}-ledger-31-index", "offload_no_match", True),
        (f"{U1}-ledger-30", "referenced", False),
        (f"{U1}-ledger-30-index", "referenced", False),
        (f"{U9}-ledger-{LONG + 500}", "offload_no_match", True),
        (f"{U9}-ledger-{LONG + 500}-index", "offload_no_match", True),
        (f"{U8}-ledger-200", "too_young", False),
        (f"{U8}-ledger-200-index", "too_young", False),
        (f"{U7}-ledger-900", "offload_no_match", True),
        (f"{U7}-ledger-900-index", "too_young", False),
        ("notes/readme.txt", "unknown_ownership", False),
    ]
)
