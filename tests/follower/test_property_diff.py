"""What a cursor's property references unlink (pure): a compaction moving
`CompactedTopicLedger`, a bucket merge, a write of an active cursor without properties, a
deleted cursor; and their index entries through the checkpoint."""

from __future__ import annotations

from array import array

from services.marker.follower.checkpoint import compress, decompress
from services.marker.follower.diff import carried, unlinked
from services.marker.follower.index import (
    Drivers,
    OwnerIndex,
    buckets_of,
    compacted_of,
    encode,
    ledger_ids,
)
from services.marker.follower.owner_paths import Kind
from services.metadata import Versioned, decode_cursor_info, encode_cursor_info
from tests.follower.property_znodes import (
    COMPACTION_PATH,
    bucket_cursor,
    bucket_key,
    compaction_cursor,
)
from tests.marker.builders import CURSOR_PATH

D = Drivers()


def _entry(path: str, data: bytes, version: int, czxid: int = 7) -> array[int]:
    return encode(Kind.CURSOR, Versioned(data, version, 0, 0, czxid, czxid + version), path, D)


def _step(old: array[int], new: array[int] | None) -> tuple[tuple[int, ...], ...]:
    """(cursor ledgers, compacted, buckets) unlinked, and the token, from old to new."""
    gone = unlinked(old, carried(old, new), D)
    return (
        tuple(ref.ledger_id for ref in gone.refs),
        gone.compacted,
        gone.buckets,
        (gone.token,),
    )


def test_a_compaction_unlinks_the_previous_compacted_ledger() -> None:
    old = _entry(COMPACTION_PATH, compaction_cursor(40), 2)
    new = _entry(COMPACTION_PATH, compaction_cursor(41), 3)
    assert _step(old, new) == ((), (40,), (), (3,))
    assert _step(old, _entry(COMPACTION_PATH, compaction_cursor(40), 3)) == ((), (), (), (3,))


def test_only_the_compaction_cursor_names_a_compacted_ledger() -> None:
    """A `CompactedTopicLedger` property on another cursor is no reference of ours."""
    assert compacted_of(_entry(CURSOR_PATH, compaction_cursor(40), 0)) == -1


def test_an_active_cursor_write_without_the_property_unlinks_nothing() -> None:
    """`switchToNewLedger` of an older release: the new cursor ledger alone. The entry keeps
    naming the compacted ledger, and the next write naming another unlinks it."""
    closed = _entry(COMPACTION_PATH, compaction_cursor(40), 2)
    active = _entry(COMPACTION_PATH, compaction_cursor(None, cursor_ledger=90), 3)
    assert _step(closed, active) == ((), (), (), (3,))
    kept = carried(closed, active)
    assert kept is not None
    assert (compacted_of(kept), compacted_of(active)) == (40, -1)
    # Compacted twice while active (the live value only in the cursor ledger), then closed.
    again = _entry(COMPACTION_PATH, compaction_cursor(42), 4)
    assert _step(kept, again) == ((90,), (40,), (), (4,))


def test_a_bucket_merge_unlinks_the_merged_buckets() -> None:
    old = _entry(CURSOR_PATH, bucket_cursor((1, 5, 50), (6, 9, 51), (10, 12, 52)), 1)
    new = _entry(CURSOR_PATH, bucket_cursor((1, 9, 53), (10, 12, 52)), 2)
    assert _step(old, new) == ((), (), (50, 51), (2,))
    assert list(buckets_of(new)) == [52, 53]


def test_a_deleted_or_recreated_cursor_unlinks_every_reference_at_token_zero() -> None:
    compaction = _entry(COMPACTION_PATH, compaction_cursor(40, cursor_ledger=90), 3)
    assert _step(compaction, None) == ((90,), (40,), (), (0,))
    buckets = _entry(CURSOR_PATH, bucket_cursor((1, 5, 50), (6, 9, 51)), 1)
    recreated = _entry(CURSOR_PATH, bucket_cursor((1, 5, 60)), 0, czxid=8)
    assert _step(buckets, recreated) == ((), (), (50, 51), (0,))


def test_a_value_that_is_no_ledger_id_is_not_followed() -> None:
    """A bucket value that is not a decimal int64 is left out (nothing is ever sent for it);
    other cursor properties are none of ours."""
    info = decode_cursor_info(bucket_cursor((1, 5, 50)), path=CURSOR_PATH)
    info.cursorProperties.add(name=bucket_key(6, 9), value="x51")
    info.cursorProperties.add(name=bucket_key(10, 12), value=str(2**64))
    entry = _entry(CURSOR_PATH, encode_cursor_info(info), 0)
    assert list(ledger_ids(entry)) == [50]


def test_entries_from_before_properties_were_kept_name_none() -> None:
    """An entry of a TSFC2 checkpoint holds the cursorsLedgerId alone: a later read naming
    property ledgers unlinks none of them."""
    old = array("q", (int(Kind.CURSOR), 1, 7, 0, 20))
    assert (compacted_of(old), list(buckets_of(old))) == (-1, [])
    new = _entry(COMPACTION_PATH, compaction_cursor(40), 2)
    assert _step(old, new) == ((20,), (), (), (2,))


def test_property_ledgers_survive_the_checkpoint() -> None:
    index = OwnerIndex()
    index.put(COMPACTION_PATH, _entry(COMPACTION_PATH, compaction_cursor(40), 2))
    index.put(CURSOR_PATH, _entry(CURSOR_PATH, bucket_cursor((1, 5, 50), (6, 9, 51)), 1))
    back = decompress(compress(index))
    assert dict(back.items()) == dict(index.items())
    assert back.ledger_count() == 3


def test_a_cursor_naming_no_property_ledger_costs_nothing_more() -> None:
    """Most cursors name neither: their entry is the cursorsLedgerId alone, as before."""
    plain = _entry(CURSOR_PATH, bucket_cursor(cursor_ledger=20), 0)
    assert list(plain[4:]) == [20]
    only_buckets = _entry(CURSOR_PATH, bucket_cursor((1, 5, 50)), 0)
    assert (compacted_of(only_buckets), list(buckets_of(only_buckets))) == (-1, [50])
