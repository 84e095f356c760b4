"""The follower index's compact storage: whatever goes in by path comes out the same, the
counts follow every change, and the checkpoint carries it (and still reads the TSFC1 format).

Owner paths follow Pulsar's layout (`MetaStoreImpl`: `/managed-ledgers/<ml name>` and a
cursor as the ML znode's child; `BookkeeperSchemaStorage`: `/schemas/<schema id>`), V1 names
(tenant/cluster/namespace) included.
"""

from __future__ import annotations

import struct
import zlib
from array import array

from hypothesis import given, settings
from hypothesis import strategies as st

from services.marker.follower.checkpoint import CheckpointUnreadable, compress, decompress
from services.marker.follower.index import OwnerIndex, pack_ints, unpack_ints
from services.marker.follower.owner_paths import Kind, classify

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ML = "/managed-ledgers/t1/ns1/persistent/topic-a"
V1_ML = "/managed-ledgers/t1/c1/ns1/persistent/topic-b"
PATHS = [
    ML,
    f"{ML}/sub-1",
    f"{ML}/sub-2",
    "/managed-ledgers/t1/ns1/persistent/topic-c",
    "/managed-ledgers/t2/ns9/persistent/topic-a",
    V1_ML,
    f"{V1_ML}/sub-1",
    "/schemas/t1/ns1/topic-a",
    "/schemas/t1/c1/ns1/topic-b",
]


SEEN = 1_800_000_000_000
"""An owner version's modification time (the entry's `seen`), ms."""


def entry_for(path: str, ids: list[int], seen: int = SEEN) -> array[int]:
    found = classify(path)
    assert found is not None, path
    if found.kind is Kind.ML:
        return array("q", (Kind.ML, 3, 77, seen, len(ids), 0, *ids))
    if found.kind is Kind.CURSOR:
        return array("q", (Kind.CURSOR, 1, 78, seen, ids[0] if ids else -1))
    return array("q", (Kind.SCHEMA, 0, 79, seen, *ids))


@given(st.lists(INT64, max_size=40))
def test_integers_survive_packing(values: list[int]) -> None:
    entry = array("q", values)
    assert unpack_ints(pack_ints(entry)) == entry


def test_close_ledger_ids_take_a_byte_each() -> None:
    ids = range(5_000_000_000, 5_000_000_010)
    assert len(pack_ints(array("q", ids))) == 5 + 9


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(PATHS),
            st.one_of(st.none(), st.lists(st.integers(0, 2**40), min_size=1, max_size=6)),
        ),
        max_size=30,
    )
)
def test_index_behaves_as_a_dict_of_paths(changes: list[tuple[str, list[int] | None]]) -> None:
    index = OwnerIndex()
    model: dict[str, array[int]] = {}
    for path, ids in changes:
        entry = None if ids is None else entry_for(path, ids)
        index.put(path, entry)
        if entry is None:
            model.pop(path, None)
        else:
            model[path] = entry
    assert dict(index.items()) == model
    assert (sorted(index.entries), len(index)) == (sorted(model), len(model))
    for path in PATHS:
        assert (index.get(path), path in index.entries) == (model.get(path), path in model)
    refs = sum(e[4] if e[0] == Kind.ML else sum(1 for i in e[4:] if i >= 0) for e in model.values())
    assert index.ledger_count() == refs
    back = decompress(compress(index))
    assert (dict(back.items()), back.ledger_count(), len(back)) == (model, refs, len(model))


def test_a_cursor_and_its_ml_share_one_record() -> None:
    index = OwnerIndex()
    index.put(ML, entry_for(ML, [1, 2]))
    index.put(f"{ML}/sub-1", entry_for(f"{ML}/sub-1", [3]))
    assert [(parent, local) for parent, local, _ in index.records()] == [
        ("/managed-ledgers/t1/ns1/persistent", "topic-a")
    ]
    index.put(ML, None)
    assert list(index.entries) == [f"{ML}/sub-1"]
    index.put(f"{ML}/sub-1", None)
    assert (list(index.records()), len(index), index.ledger_count()) == ([], 0, 0)


def _without_seen(entry: array[int]) -> array[int]:
    """The entry as written before `seen` was kept: a three-integer header."""
    return entry[:3] + entry[4:]


def test_a_checkpoint_of_the_first_format_is_read() -> None:
    """TSFC1: drivers, then per owner its path, u32 length and little-endian int64s (a
    three-integer header: read with `seen` 0, unknown)."""
    entry = _without_seen(entry_for(ML, [5, 6]))
    raw = b"TSFC1" + struct.pack("<I", 0) + struct.pack("<Q", 1)
    raw += struct.pack("<H", len(ML)) + ML.encode() + struct.pack("<I", len(entry))
    raw += struct.pack(f"<{len(entry)}q", *entry)
    back = decompress(zlib.compress(raw))
    assert (dict(back.items()), back.ledger_count()) == ({ML: entry_for(ML, [5, 6], 0)}, 2)


def test_a_checkpoint_from_before_seen_was_kept_reads_it_as_unknown() -> None:
    """A TSFC3 checkpoint (records as stored then, three-integer headers) is read whole, each
    entry with `seen` 0: its diffs send no `seen_at_ms`, as the follower did then. The
    pointer's write time is not used instead: the index may hold an entry older than its
    owner was when the checkpoint was written."""
    cursor = f"{ML}/sub-1"
    old = OwnerIndex()
    old.put(ML, _without_seen(entry_for(ML, [5, 6])))
    old.put(cursor, _without_seen(entry_for(cursor, [7])))
    blob = zlib.decompress(compress(old))
    assert blob.startswith(b"TSFC4")
    back = decompress(zlib.compress(b"TSFC3" + blob[5:]))
    expected = {ML: entry_for(ML, [5, 6], 0), cursor: entry_for(cursor, [7], 0)}
    assert (dict(back.items()), back.ledger_count()) == (expected, 3)


def test_seen_survives_the_checkpoint() -> None:
    """Entries keep their `seen` through a checkpoint written now."""
    index = OwnerIndex()
    index.put(ML, entry_for(ML, [5, 6], SEEN + 5))
    back = decompress(compress(index))
    assert dict(back.items()) == {ML: entry_for(ML, [5, 6], SEEN + 5)}


def test_a_record_that_does_not_parse_is_refused() -> None:
    index = OwnerIndex()
    index.put(ML, entry_for(ML, [1]))
    blob = zlib.decompress(compress(index))
    damaged = blob[:-1] + b"\xff"  # the record's last varint now runs off its end
    try:
        decompress(zlib.compress(damaged))
    except CheckpointUnreadable:
        return
    raise AssertionError("accepted a damaged record")
