"""The decision table (docs/design.md §4): component × tier × situation → verdict, on real ZK
and S3; its absent-ledger rows on Oxia too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest

from services.metadata.ledger_metadata import LedgerState, decode_ledger_metadata
from services.metadata.paths import LAYOUT_ZNODE
from services.verifier.model import Decision, SkipReason
from tests.store_kinds import StoreKind
from tests.verifier.conftest import make_parts
from tests.verifier.world import (
    CURSOR,
    ML,
    OTHER_BUCKET,
    OTHER_ML,
    OTHER_UUID,
    PATHS,
    SCHEMA,
    UUID,
    Listed,
    World,
    cursor_meta,
    data_meta,
    pdli,
    schema_meta,
)
from tombstone.v1 import pending_delete_pb2 as pb

Step = Callable[[World], Awaitable[Any]]
DELETE, SKIP, RETRY = Decision.DELETE, Decision.SKIP, Decision.RETRY
IN_USE, MISMATCH = SkipReason.IN_USE, SkipReason.MISMATCH
NOT_FOUND, INVALID = SkipReason.NOT_FOUND, SkipReason.INVALID
CUR: dict[str, Any] = {"component": pb.MANAGED_CURSOR, "cursor": CURSOR}
SCH: dict[str, Any] = {"component": pb.SCHEMA_STORAGE, "schema_id": SCHEMA}
OFF: dict[str, Any] = {"tier": pb.OFFLOAD_LEDGER, "uuid": UUID}


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple[Step, ...]
    request: pb.PendingDeleteLedgerInfo
    decision: Decision
    skip: SkipReason | None
    code: str


def case(
    name: str,
    steps: list[Step],
    request: pb.PendingDeleteLedgerInfo,
    decision: Decision,
    skip: SkipReason | None,
    code: str,
) -> Any:
    return pytest.param(Case(name, tuple(steps), request, decision, skip, code), id=name)


# One line per situation reads as a table; the formatter would explode it.
# fmt: off
CASES = [
    # --- managed-ledger data ledgers, BookKeeper tier ---
    case("ml/listed", [lambda w: w.ledger(1), lambda w: w.ml([1])], pdli(1),
         SKIP, IN_USE, "listed"),
    case("ml/listed-fence-not-reached", [lambda w: w.ledger(1), lambda w: w.ml([1], version=2)],
         pdli(1, fence=3), RETRY, None, "marking_in_progress"),
    case("ml/listed-fence-reached", [lambda w: w.ledger(1), lambda w: w.ml([1], version=3)],
         pdli(1, fence=3), SKIP, IN_USE, "listed"),
    case("ml/unlisted-match", [lambda w: w.ledger(1), lambda w: w.ml([2])], pdli(1),
         DELETE, None, "ledger"),
    case("ml/unlisted-fence-reached", [lambda w: w.ledger(1), lambda w: w.ml([2], version=3)],
         pdli(1, fence=3), DELETE, None, "ledger"),
    case("ml/absent-from-bookkeeper", [lambda w: w.ml([2])], pdli(1),
         SKIP, NOT_FOUND, "ledger_absent"),
    case("ml/listed-and-absent-from-bookkeeper", [lambda w: w.ml([1])], pdli(1),
         SKIP, IN_USE, "listed"),
    case("ml/metadata-of-another-topic", [lambda w: w.ledger(1, data_meta(OTHER_ML)),
                                          lambda w: w.ml([2])], pdli(1),
         SKIP, MISMATCH, "mismatch"),
    case("ml/metadata-of-a-cursor", [lambda w: w.ledger(1, cursor_meta()), lambda w: w.ml([2])],
         pdli(1), SKIP, MISMATCH, "mismatch"),
    case("ml/metadata-of-a-schema", [lambda w: w.ledger(1, schema_meta()), lambda w: w.ml([2])],
         pdli(1), SKIP, MISMATCH, "mismatch"),
    # Pulsar < 2.2 wrote no custom metadata: deletable only with a signed intent whose owner
    # unlinked it (ownership.proves_unlink); an unsigned one is dead-lettered.
    case("ml/metadata-missing", [lambda w: w.ledger(1, {}), lambda w: w.ml([2])], pdli(1),
         SKIP, MISMATCH, "no_owner_proof"),
    # OPEN only matters for a ledger that may be about to be referenced (docs/design.md §4.4): a
    # rollover ledger is created before the ML's CAS lists it (ManagedLedgerImpl.createLedger
    # then updateLedgersListAfterRollover), so an unlisted OPEN ledger newer than the list is
    # RETRY, never an acknowledged SKIP; one below the lowest listed id is not in creation.
    case("ml/open-ledger-newer-than-list",
         [lambda w: w.ledger(3, state=LedgerState.OPEN), lambda w: w.ml([2])], pdli(3),
         RETRY, None, "open_ledger"),
    case("ml/in-recovery-newer-than-list",
         [lambda w: w.ledger(3, state=LedgerState.IN_RECOVERY), lambda w: w.ml([2])], pdli(3),
         RETRY, None, "open_ledger"),
    case("ml/open-ledger-below-lowest-listed",
         [lambda w: w.ledger(1, state=LedgerState.OPEN), lambda w: w.ml([2])], pdli(1),
         DELETE, None, "ledger"),
    # A fence token alone proves no unlink (anyone can write one): an OPEN ledger newer than
    # every reference needs a signed or believed intent (test_legacy_ledgers, test_believed).
    case("ml/open-ledger-unsigned-fence-reached",
         [lambda w: w.ledger(3, state=LedgerState.OPEN), lambda w: w.ml([2], version=4)],
         pdli(3, fence=4), RETRY, None, "open_ledger"),
    case("ml/open-ledger-fence-not-reached",
         [lambda w: w.ledger(3, state=LedgerState.OPEN), lambda w: w.ml([2], version=3)],
         pdli(3, fence=4), RETRY, None, "open_ledger"),
    case("ml/open-ledger-reconciler-fence-is-no-proof",
         [lambda w: w.ledger(3, state=LedgerState.OPEN), lambda w: w.ml([2], version=4)],
         pdli(3, fence=4, source=pb.OPERATOR), RETRY, None, "open_ledger"),
    case("ml/open-ledger-topic-deleted", [lambda w: w.ledger(1, state=LedgerState.OPEN)],
         pdli(1), DELETE, None, "ledger"),
    case("ml/topic-deleted", [lambda w: w.ledger(1)], pdli(1), DELETE, None, "ledger"),
    case("ml/listed-offloaded-bookkeeper-deleted",
         [lambda w: w.ledger(1), lambda w: w.ml([Listed(1, UUID, bookkeeper_deleted=True)])],
         pdli(1), DELETE, None, "ledger"),
    case("ml/listed-offloaded-bookkeeper-kept",
         [lambda w: w.ledger(1), lambda w: w.ml([Listed(1, UUID)])], pdli(1),
         SKIP, IN_USE, "listed"),
    # --- cursor ledgers ---
    case("cursor/listed", [lambda w: w.ledger(5, cursor_meta()), lambda w: w.cursor(5)],
         pdli(5, **CUR), SKIP, IN_USE, "listed"),
    case("cursor/listed-fence-not-reached",
         [lambda w: w.ledger(5, cursor_meta()), lambda w: w.cursor(5, version=1)],
         pdli(5, fence=2, **CUR), RETRY, None, "marking_in_progress"),
    case("cursor/listed-fence-reached",
         [lambda w: w.ledger(5, cursor_meta()), lambda w: w.cursor(5, version=2)],
         pdli(5, fence=2, **CUR), SKIP, IN_USE, "listed"),
    case("cursor/moved-on", [lambda w: w.ledger(5, cursor_meta()), lambda w: w.cursor(6)],
         pdli(5, **CUR), DELETE, None, "ledger"),
    case("cursor/closed-cleanly", [lambda w: w.ledger(5, cursor_meta()), lambda w: w.cursor(-1)],
         pdli(5, **CUR), DELETE, None, "ledger"),
    case("cursor/absent-from-bookkeeper", [lambda w: w.cursor(6)], pdli(5, **CUR),
         SKIP, NOT_FOUND, "ledger_absent"),
    case("cursor/metadata-of-another-cursor",
         [lambda w: w.ledger(5, cursor_meta(cursor="sub-b")), lambda w: w.cursor(6)],
         pdli(5, **CUR), SKIP, MISMATCH, "mismatch"),
    case("cursor/metadata-of-a-data-ledger",
         [lambda w: w.ledger(5, data_meta()), lambda w: w.cursor(6)],
         pdli(5, **CUR), SKIP, MISMATCH, "mismatch"),
    case("cursor/metadata-missing", [lambda w: w.ledger(5, {}), lambda w: w.cursor(6)],
         pdli(5, **CUR), SKIP, MISMATCH, "no_owner_proof"),
    # ManagedCursorImpl.switchToNewLedger persists the new cursorsLedgerId and then deletes
    # the old ledger without closing it: OPEN, below the current one → DELETE.
    case("cursor/open-old-ledger-after-switch",
         [lambda w: w.ledger(5, cursor_meta(), state=LedgerState.OPEN), lambda w: w.ml([1]),
          lambda w: w.cursor(6)], pdli(5, **CUR), DELETE, None, "ledger"),
    # Unsubscribe (ManagedLedgerImpl.asyncDeleteCursor): the cursor znode is removed, then
    # ManagedCursorImpl.asyncDeleteCursorLedger deletes the OPEN ledger.
    # Unsigned, the same intent cannot tell an unsubscribed cursor from one in creation.
    case("cursor/open-ledger-cursor-deleted-unsigned",
         [lambda w: w.ledger(5, cursor_meta(), state=LedgerState.OPEN), lambda w: w.ml([1])],
         pdli(5, fence=1, **CUR), RETRY, None, "open_ledger"),
    case("cursor/open-ledger-unlinked-to-none-unsigned",
         [lambda w: w.ledger(5, cursor_meta(), state=LedgerState.OPEN), lambda w: w.ml([1]),
          lambda w: w.cursor(-1, version=1)], pdli(5, fence=1, **CUR), RETRY, None,
         "open_ledger"),
    # A new cursor's ledger is created before its znode (ManagedCursorImpl.initialize →
    # createNewMetadataLedger): without a fence token nothing shows it unlinked.
    case("cursor/open-ledger-cursor-in-creation",
         [lambda w: w.ledger(5, cursor_meta(), state=LedgerState.OPEN), lambda w: w.ml([1])],
         pdli(5, **CUR), RETRY, None, "open_ledger"),
    case("cursor/open-ledger-newer-than-current",
         [lambda w: w.ledger(7, cursor_meta(), state=LedgerState.OPEN), lambda w: w.ml([1]),
          lambda w: w.cursor(6)], pdli(7, **CUR), RETRY, None, "open_ledger"),
    # --- schema ledgers ---
    case("schema/listed", [lambda w: w.ledger(7, schema_meta()), lambda w: w.schema([3, 7])],
         pdli(7, **SCH), SKIP, IN_USE, "listed"),
    case("schema/listed-fence-not-reached",
         [lambda w: w.ledger(7, schema_meta()), lambda w: w.schema([7])],
         pdli(7, fence=1, **SCH), RETRY, None, "marking_in_progress"),
    case("schema/unlisted-match", [lambda w: w.ledger(7, schema_meta()), lambda w: w.schema([3])],
         pdli(7, **SCH), DELETE, None, "ledger"),
    case("schema/metadata-of-another-schema",
         [lambda w: w.ledger(7, schema_meta("public/default/other")), lambda w: w.schema([3])],
         pdli(7, **SCH), SKIP, MISMATCH, "mismatch"),
    case("schema/metadata-of-a-data-ledger",
         [lambda w: w.ledger(7, data_meta()), lambda w: w.schema([3])],
         pdli(7, **SCH), SKIP, MISMATCH, "mismatch"),
    case("schema/absent-from-bookkeeper", [lambda w: w.schema([3])], pdli(7, **SCH),
         SKIP, NOT_FOUND, "ledger_absent"),
    case("schema/open-ledger-newer-than-index",
         [lambda w: w.ledger(7, schema_meta(), state=LedgerState.OPEN), lambda w: w.schema([3])],
         pdli(7, **SCH), RETRY, None, "open_ledger"),
    case("schema/open-ledger-below-index",
         [lambda w: w.ledger(2, schema_meta(), state=LedgerState.OPEN), lambda w: w.schema([3])],
         pdli(2, **SCH), DELETE, None, "ledger"),
    # BookkeeperSchemaStorage writes the ledger before the locator: no locator is no proof.
    case("schema/open-ledger-no-locator",
         [lambda w: w.ledger(7, schema_meta(), state=LedgerState.OPEN)],
         pdli(7, **SCH), RETRY, None, "open_ledger"),
    # --- offloaded copies ---
    case("offload/listed-same-uuid", [lambda w: w.ml([Listed(1, UUID)]), lambda w: w.objects(1)],
         pdli(1, **OFF), SKIP, IN_USE, "listed"),
    case("offload/listed-fence-not-reached",
         [lambda w: w.ml([Listed(1, UUID)], version=4), lambda w: w.objects(1)],
         pdli(1, fence=5, **OFF), RETRY, None, "marking_in_progress"),
    case("offload/listed-bookkeeper-deleted",
         [lambda w: w.ml([Listed(1, UUID, bookkeeper_deleted=True)]), lambda w: w.objects(1)],
         pdli(1, **OFF), SKIP, IN_USE, "listed"),
    case("offload/listed-with-another-uuid",
         [lambda w: w.ml([Listed(1, OTHER_UUID)]), lambda w: w.objects(1)],
         pdli(1, **OFF), DELETE, None, "offload_objects"),
    case("offload/unlisted-present", [lambda w: w.ml([2]), lambda w: w.objects(1)],
         pdli(1, **OFF), DELETE, None, "offload_objects"),
    case("offload/data-object-only", [lambda w: w.ml([2]), lambda w: w.objects(1, index=False)],
         pdli(1, **OFF), DELETE, None, "offload_objects"),
    case("offload/without-object-metadata",
         [lambda w: w.ml([2]), lambda w: w.objects(1, ml=None, cluster=None)],
         pdli(1, **OFF), SKIP, MISMATCH, "no_owner_proof"),
    case("offload/absent", [lambda w: w.ml([2]), lambda w: w.bucket()], pdli(1, **OFF),
         SKIP, NOT_FOUND, "objects_absent"),
    case("offload/bucket-not-allowed",
         [lambda w: w.ml([2]), lambda w: w.objects(1, bucket=OTHER_BUCKET)],
         pdli(1, bucket=OTHER_BUCKET, **OFF), SKIP, MISMATCH, "mismatch"),
    case("offload/another-ml-name", [lambda w: w.ml([2]), lambda w: w.objects(1, ml=OTHER_ML)],
         pdli(1, **OFF), SKIP, MISMATCH, "mismatch"),
    case("offload/another-cluster", [lambda w: w.ml([2]), lambda w: w.objects(1, cluster="east")],
         pdli(1, **OFF), SKIP, MISMATCH, "mismatch"),
    case("offload/no-bucket-no-default", [lambda w: w.ml([2])], pdli(1, bucket=None, **OFF),
         SKIP, SkipReason.UNSUPPORTED, "no_default_offload"),
    case("offload/filesystem-not-allowed", [lambda w: w.ml([2])],
         pdli(1, driver="filesystem", **OFF), SKIP, MISMATCH, "mismatch"),
    # --- invalid PDLIs ---
    case("invalid/no-ledger-id", [], pdli(None), SKIP, INVALID, "invalid"),
    case("invalid/no-type", [], pdli(1, tier=pb.LEDGER_TYPE_UNSPECIFIED), SKIP, INVALID,
         "invalid"),
    case("invalid/no-component", [], pdli(1, component=pb.LEDGER_COMPONENT_UNSPECIFIED),
         SKIP, INVALID, "invalid"),
    case("invalid/cursor-without-name", [], pdli(1, component=pb.MANAGED_CURSOR), SKIP, INVALID,
         "invalid"),
    case("invalid/offload-without-uuid", [], pdli(1, tier=pb.OFFLOAD_LEDGER), SKIP, INVALID,
         "invalid"),
    case("invalid/schema-offload", [], pdli(7, tier=pb.OFFLOAD_LEDGER, uuid=UUID, **SCH),
         SKIP, INVALID, "invalid"),
    case("invalid/topic-of-another-ml", [], pdli(1, topic="persistent://public/default/x"),
         SKIP, INVALID, "invalid"),
    case("invalid/bad-ml-name", [], pdli(1, ml="not-an-ml"), SKIP, INVALID, "invalid"),
]
# fmt: on


@pytest.mark.parametrize("batch", [False, True], ids=["verify", "verify_batch"])
@pytest.mark.parametrize("c", CASES)
async def test_decision_table(c: Case, batch: bool, world: World, parts: Any) -> None:
    """Each situation gets exactly the verdict and reason docs/design.md §4 prescribes, alone or
    inside a batch (its ledger prefetched with the other PDLIs' by one multiRead)."""
    for step in c.steps:
        await step(world)
    if batch:
        # A second, absent ledger rides along: the batch read must keep them apart.
        verdict = (await parts.engine.verify_batch([c.request, pdli(999)]))[0]
    else:
        verdict = await parts.engine.verify(c.request)
    assert (c.decision, c.skip, c.code) == (verdict.decision, verdict.skip_reason, verdict.code)
    if verdict.decision is DELETE and c.request.ledger_type == pb.LEDGER:
        node = await world.store.get(verdict.bookkeeper.path)
        stored = decode_ledger_metadata(node.data, ledger_id=c.request.ledger_id, path="")
        assert (verdict.bookkeeper.path, node.version) == (
            f"/ledgers/00/0000/L000{c.request.ledger_id}",
            verdict.bookkeeper.version,
        )
        # The size counted by the deleter: the metadata's length, final only once CLOSED.
        closed = stored.state is LedgerState.CLOSED
        assert verdict.bookkeeper.length_bytes == (stored.length if closed else None)


#: The rows whose ledger is absent from BookKeeper: a data, a cursor and a schema ledger.
ABSENT = [param.values[0] for param in CASES if param.values[0].code == "ledger_absent"]


async def test_absent_ledgers_are_not_found_on_both_stores(
    store_kind: StoreKind, config: Any, s3client: Any
) -> None:
    """The absent-from-BookKeeper rows on ZooKeeper and on Oxia: NOT_FOUND alone and in one
    batch (an absent key read as absent, not as an error), and RETRY `layout_absent` once
    `LAYOUT` is gone, since absence proves nothing under an unconfirmed root."""
    assert [c.name for c in ABSENT] == [
        "ml/absent-from-bookkeeper",
        "cursor/absent-from-bookkeeper",
        "schema/absent-from-bookkeeper",
    ]
    async with store_kind.open() as store:
        world = World(store, s3client)
        await world.bookkeeper_root()
        for c in ABSENT:
            for step in c.steps:
                await step(world)
        parts = make_parts(config, store, s3client)
        await parts.believed.refresh()
        requests = [c.request for c in ABSENT]
        alone = [await parts.engine.verify(request) for request in requests]
        together = await parts.engine.verify_batch(requests)
        layout = f"{PATHS.root}/{LAYOUT_ZNODE}"
        await store.delete(layout, version=(await store.get(layout)).version)
        unconfirmed = await parts.engine.verify_batch(requests)
    found = [(v.decision, v.skip_reason, v.code) for v in alone + together]
    assert found == [(SKIP, NOT_FOUND, "ledger_absent")] * 6
    assert [(v.decision, v.code) for v in unconfirmed] == [(RETRY, "layout_absent")] * 3


async def test_offload_evidence_names_the_computed_keys(world: World, parts: Any) -> None:
    """DELETE for an offloaded copy names the bucket, the two keys built from uuid and id, and
    the size of what was HEADed: the data object alone when it is there (the data and index
    objects of BlobStoreManagedLedgerOffloader are one byte each here)."""
    await world.ml([2])
    keys = await world.objects(1)
    verdict = await parts.engine.verify(pdli(1, **OFF))
    assert (DELETE, "offload", keys, 1) == (
        verdict.decision,
        verdict.offload.bucket,
        verdict.offload.keys,
        verdict.offload.size_bytes,
    )


async def test_empty_driver_metadata_uses_the_default_bucket(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """Ledgers offloaded before driver metadata existed use the configured default bucket."""
    await world.objects(1)
    policy = replace(config.offload, default_bucket="offload")
    parts = make_parts(replace(config, offload=policy), store, s3client)
    verdict = await parts.engine.verify(pdli(1, bucket=None, **OFF))
    assert verdict.offload is not None
    assert (verdict.decision, verdict.offload.bucket) == (DELETE, "offload")


async def test_filesystem_offload_gives_a_path(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """The filesystem offloader's copy is named by `<base>/<ml>/<id>-<uuid>` as evidence."""
    policy = replace(config.offload, allowed_filesystem_bases=frozenset({"hdfs://nn"}))
    parts = make_parts(replace(config, offload=policy), store, s3client)
    request = pdli(1, driver="filesystem", bucket=None, **OFF)
    request.offload_context.driver_metadata["storageBasePath"] = "hdfs://nn"
    verdict = await parts.engine.verify(request)
    assert verdict.offload is not None
    assert (DELETE, f"hdfs://nn/{ML}/1-{UUID}") == (
        verdict.decision,
        verdict.offload.filesystem_path,
    )


async def test_reconciler_young_ledger_is_retried(world: World, parts: Any) -> None:
    """A RECONCILER PDLI for a ledger younger than the age window (3 days) is undecided, not
    settled: RETRY (dead-lettered if it stays young), never an acknowledged SKIP."""
    await world.ledger(1)
    verdict = await parts.engine.verify(pdli(1, source=pb.RECONCILER))
    assert (verdict.decision, verdict.code) == (RETRY, "too_young")


async def test_reconciler_old_ledger_is_deleted(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """Past the age window, a RECONCILER PDLI for an unreferenced matching ledger is DELETE."""
    await world.ledger(1)
    parts = make_parts(replace(config, reconciler_min_age=timedelta(0)), store, s3client)
    verdict = await parts.engine.verify(pdli(1, source=pb.RECONCILER))
    assert verdict.decision == DELETE


async def test_reconciler_young_objects_are_retried(world: World, parts: Any) -> None:
    """Offloaded objects younger than the window are undecided for the reconciler: RETRY."""
    await world.objects(1)
    verdict = await parts.engine.verify(pdli(1, source=pb.RECONCILER, **OFF))
    assert (verdict.decision, verdict.code) == (RETRY, "too_young")


async def test_reconciler_objects_of_a_deleted_topic_are_deleted(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """RECONCILER OFFLOAD_LEDGER PDLI whose owner ML is gone (a scan found the objects): no
    reference, identity matches, past the window → DELETE both keys."""
    keys = await world.objects(1)
    parts = make_parts(replace(config, reconciler_min_age=timedelta(0)), store, s3client)
    verdict = await parts.engine.verify(pdli(1, source=pb.RECONCILER, **OFF))
    evidence = verdict.offload
    assert (verdict.decision, evidence.keys if evidence else None) == (DELETE, keys)


async def test_reconciler_objects_of_another_upload_are_deleted(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """RECONCILER OFFLOAD_LEDGER PDLI for objects under a uuid other than the one listed:
    the abandoned upload is DELETE, the listed one SKIP IN_USE."""
    await world.ml([Listed(1, uuid=OTHER_UUID)])
    await world.objects(1)
    await world.objects(1, uuid=OTHER_UUID)
    parts = make_parts(replace(config, reconciler_min_age=timedelta(0)), store, s3client)
    abandoned = await parts.engine.verify(pdli(1, source=pb.RECONCILER, **OFF))
    listed = await parts.engine.verify(
        pdli(1, source=pb.RECONCILER, tier=pb.OFFLOAD_LEDGER, uuid=OTHER_UUID)
    )
    assert (abandoned.decision, listed.decision, listed.skip_reason) == (DELETE, SKIP, IN_USE)


async def test_open_ledger_past_the_age_window_is_not_in_creation(
    world: World, config: Any, store: Any, s3client: Any
) -> None:
    """An OPEN ledger nothing shows unlinked, newer than the list, is RETRY while young and
    DELETE once older than the OPEN-ledger age window (the ledger's `ctime`, stored when the
    BookKeeper client has `storeSystemtimeAsLedgerCreationTime`; else the znode's)."""
    await world.ledger(3, state=LedgerState.OPEN, ctime=1_000)
    await world.ml([2])
    young = make_parts(replace(config, open_ledger_age=timedelta(days=365_000)), store, s3client)
    old = make_parts(replace(config, open_ledger_age=timedelta(days=1)), store, s3client)
    verdicts = (await young.engine.verify(pdli(3)), await old.engine.verify(pdli(3)))
    assert [(v.decision, v.code) for v in verdicts] == [(RETRY, "open_ledger"), (DELETE, "ledger")]
