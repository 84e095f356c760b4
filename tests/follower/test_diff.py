"""The index entries and their diff (pure): what each owner change unlinks, with which tiers
and fence token; and the checkpoint's encoding round trip."""

from __future__ import annotations

from array import array

from services.marker.follower.checkpoint import CheckpointUnreadable, compress, decompress
from services.marker.follower.diff import stale, unlinked
from services.marker.follower.index import Drivers, OwnerIndex, encode, ml_refs
from services.marker.follower.owner_paths import Kind
from services.metadata import LedgerInfo, Versioned
from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    ManagedLedgerInfo,
    encode_managed_ledger_info,
)
from tests.marker.builders import (
    CURSOR_PATH,
    ML_PATH,
    SCHEMA_PATH,
    UID_MSB,
    cursor_bytes,
    ledger,
    ml_bytes,
    schema_bytes,
)
from tombstone.v1 import pending_delete_pb2 as _pd

L, OFF = _pd.LEDGER, _pd.OFFLOAD_LEDGER


def _node(data: bytes, version: int, czxid: int = 7) -> Versioned:
    return Versioned(data, version, 0, 0, czxid, czxid + version)


def _ml(*ledgers: LedgerInfo, version: int = 0, czxid: int = 7, drivers: Drivers) -> array[int]:
    return encode(Kind.ML, _node(ml_bytes(*ledgers), version, czxid), ML_PATH, drivers)


def _gone(
    old: array[int], new: array[int] | None, drivers: Drivers
) -> set[tuple[int, tuple[int, ...]]]:
    return {(ref.ledger_id, ref.tiers) for ref in unlinked(old, new, drivers).refs}


def test_dropped_ledgers_carry_the_tiers_they_had() -> None:
    """A plain ledger: LEDGER; offloaded, BookKeeper copy kept: both tiers; offloaded with
    `bookkeeperDeleted`: OFFLOAD_LEDGER only; an upload started, not complete: both."""
    d = Drivers()
    old = _ml(
        ledger(1),
        ledger(2, offload="complete"),
        ledger(3, offload="bk_deleted"),
        ledger(4, offload="started"),
        ledger(5),
        drivers=d,
    )
    new = _ml(ledger(5), version=3, drivers=d)
    assert {(1, (L,)), (2, (L, OFF)), (3, (OFF,)), (4, (L, OFF))} == _gone(old, new, d)
    assert unlinked(old, new, d).token == 3


def test_gaining_bookkeeper_deleted_unlinks_the_bookkeeper_copy_only() -> None:
    d = Drivers()
    old = _ml(ledger(1, offload="complete"), drivers=d)
    new = _ml(ledger(1, offload="bk_deleted"), version=1, drivers=d)
    [ref] = unlinked(old, new, d).refs
    assert ref.ledger_id == 1
    assert ref.tiers == (L,)
    assert ref.offload is not None
    assert ref.offload.bookkeeper_deleted


def test_a_ledger_first_seen_flagged_unlinks_its_bookkeeper_copy() -> None:
    """Rollover, offload and `bookkeeperDeleted` written between two reads of the owner
    (`ManagedLedgerImpl.createLedgerAfterClosed` lists the ledger, then the offload loop and
    `maybeOffload`'s deletion lag flag it): the read shows the ledger for the first time,
    already flagged. Its BookKeeper copy is unlinked at that version; so is a flagged ledger
    of an owner first seen in a re-read. A first-seen ledger that is not flagged is not."""
    d = Drivers()
    old = _ml(ledger(1), drivers=d)
    new = _ml(ledger(1), ledger(2, offload="bk_deleted"), ledger(3), version=4, drivers=d)
    change = unlinked(old, new, d)
    assert [(ref.ledger_id, ref.tiers) for ref in change.unseen] == [(2, (L,))]
    assert (change.refs, change.token) == ((), 4)
    assert change.unseen[0].offload is not None
    assert change.unseen[0].offload.bookkeeper_deleted
    fresh = unlinked(None, new, d)
    assert ([(r.ledger_id, r.tiers) for r in fresh.unseen], fresh.token) == ([(2, (L,))], 4)


def test_a_new_upload_unlinks_the_objects_of_the_previous_one() -> None:
    d = Drivers()
    old = _ml(ledger(1, offload="complete"), drivers=d)
    replaced = ledger(1, offload="complete")
    replaced.offloadContext.uidMsb = UID_MSB + 1
    [ref] = unlinked(old, _ml(replaced, version=1, drivers=d), d).refs
    assert (ref.tiers, ref.offload.uuid_msb if ref.offload else None) == ((OFF,), UID_MSB)


def test_offload_contexts_survive_the_index() -> None:
    """The context read back from the entry is the one Pulsar wrote (uuid, driver, flags)."""
    d = Drivers()
    entry = _ml(ledger(1), ledger(2, offload="complete"), drivers=d)
    ref = ml_refs(entry, d)[2]
    assert ref.offload is not None
    assert (ref.offload.uuid_msb, ref.offload.driver_name, ref.offload.complete) == (
        UID_MSB,
        "aws-s3",
        True,
    )
    assert dict(ref.offload.driver_metadata) == {"bucket": "offload-bucket"}


def test_cursor_switch_and_schema_versions() -> None:
    d = Drivers()
    old_cursor = encode(Kind.CURSOR, _node(cursor_bytes(20), 0), CURSOR_PATH, d)
    new_cursor = encode(Kind.CURSOR, _node(cursor_bytes(21), 1), CURSOR_PATH, d)
    assert {(20, (L,))} == _gone(old_cursor, new_cursor, d)
    old_schema = encode(Kind.SCHEMA, _node(schema_bytes(30, 31, 32), 0), SCHEMA_PATH, d)
    new_schema = encode(Kind.SCHEMA, _node(schema_bytes(32), 4), SCHEMA_PATH, d)
    assert {(30, (L,)), (31, (L,))} == _gone(old_schema, new_schema, d)


def test_deleted_or_recreated_owner_unlinks_everything_at_token_zero() -> None:
    """Deleted, or created again (another czxid): all it referenced, fence token 0."""
    d = Drivers()
    old = _ml(ledger(1), ledger(2, offload="bk_deleted"), version=5, drivers=d)
    for new in (None, _ml(ledger(9), version=0, czxid=99, drivers=d)):
        outcome = unlinked(old, new, d)
        assert {(1, (L,)), (2, (OFF,))} == _gone(old, new, d)
        assert (outcome.token, outcome.previous_version) == (0, 5)
    absent_cursor = encode(Kind.CURSOR, _node(cursor_bytes(-1), 0), CURSOR_PATH, d)
    assert unlinked(absent_cursor, None, d).refs == ()


def test_an_older_read_is_stale() -> None:
    d = Drivers()
    old = _ml(ledger(1), version=4, drivers=d)
    assert stale(old, _ml(ledger(1), version=4, drivers=d))
    assert not stale(old, _ml(ledger(1), version=5, drivers=d))
    assert not stale(old, _ml(ledger(1), version=1, czxid=8, drivers=d))


def test_checkpoint_round_trip() -> None:
    index = OwnerIndex()
    index.put(ML_PATH, _ml(ledger(1), ledger(2, offload="complete"), drivers=index.drivers))
    index.put(
        CURSOR_PATH, encode(Kind.CURSOR, _node(cursor_bytes(20), 3), CURSOR_PATH, index.drivers)
    )
    back = decompress(compress(index))
    assert dict(back.items()) == dict(index.items())
    assert (len(back), list(back.entries)) == (2, [ML_PATH, CURSOR_PATH])
    assert back.drivers.table == index.drivers.table
    assert back.ledger_count() == 3


def test_a_damaged_checkpoint_is_refused() -> None:
    blob = compress(OwnerIndex())
    for damaged in (blob[:-3], b"junk"):
        try:
            decompress(damaged)
        except CheckpointUnreadable:
            continue
        raise AssertionError("accepted a damaged checkpoint")


def _shadow(*ledgers: LedgerInfo, version: int = 0, drivers: Drivers) -> array[int]:
    info = ManagedLedgerInfo()
    info.ledgerInfo.extend(ledgers)
    info.properties.add(key=SHADOW_SOURCE, value="persistent://public/default/source")
    data = encode_managed_ledger_info(info)
    return encode(Kind.ML, _node(data, version), ML_PATH, drivers)


def test_a_shadow_topics_list_unlinks_nothing() -> None:
    """A shadow topic (PIP-180, `ShadowManagedLedgerImpl`) keeps a copy of its source's list
    under `PULSAR.SHADOW_SOURCE`: its copy dropping a ledger, or the shadow's deletion, leaves
    the source's ledgers referenced by the source. Found by the simulation (a shadow deleted
    while its source still listed a ledger created before Pulsar 2.2: the follower's signed
    PDLI naming the shadow was that ledger's proof of ownership, and it was deleted)."""
    d = Drivers()
    old = _shadow(ledger(1), ledger(2, offload="complete"), version=3, drivers=d)
    assert _gone(old, _shadow(ledger(2, offload="complete"), version=4, drivers=d), d) == set()
    assert _gone(old, None, d) == set()
    assert ml_refs(old, d) == {}


def _timed(
    *ledgers: LedgerInfo, version: int, mtime: int, czxid: int = 7, d: Drivers
) -> array[int]:
    node = Versioned(ml_bytes(*ledgers), version, 0, mtime, czxid, czxid + version)
    return encode(Kind.ML, node, ML_PATH, d)


def test_what_left_was_seen_when_the_store_wrote_the_last_version_naming_it() -> None:
    """`seen_ms` is the modification time of the indexed version that still listed the
    ledgers (the store's clock), not of the version read now; a deleted or re-created owner's
    ledgers likewise; a first-seen flagged copy, never seen referenced, has none."""
    d = Drivers()
    old = _timed(ledger(1), ledger(2), version=3, mtime=1_000, d=d)
    new = _timed(ledger(2), ledger(3, offload="bk_deleted"), version=9, mtime=5_000, d=d)
    change = unlinked(old, new, d)
    assert ([r.ledger_id for r in change.refs], change.seen_ms) == ([1], 1_000)
    assert [r.ledger_id for r in change.unseen] == [3]
    assert unlinked(old, None, d).seen_ms == 1_000
    recreated = _timed(ledger(9), version=0, mtime=7_000, czxid=99, d=d)
    assert unlinked(old, recreated, d).seen_ms == 1_000
    assert unlinked(None, new, d).seen_ms == 0


def test_a_cursor_s_ledgers_were_seen_at_its_last_indexed_version() -> None:
    """The previous cursor ledger was seen when the store wrote the version naming it."""
    d = Drivers()
    node = Versioned(cursor_bytes(20), 2, 0, 3_000, 7, 9)
    old = encode(Kind.CURSOR, node, CURSOR_PATH, d)
    new = encode(Kind.CURSOR, _node(cursor_bytes(21), 3), CURSOR_PATH, d)
    change = unlinked(old, new, d)
    assert ([r.ledger_id for r in change.refs], change.seen_ms) == ([20], 3_000)
