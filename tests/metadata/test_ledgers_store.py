"""BookKeeperLedgers against the real ZooKeeper: read, CAS delete, parent cleanup, iteration."""

from __future__ import annotations

import asyncio

import pytest

from services.core.errors import InvalidArgument
from services.metadata import (
    BookKeeperLedgers,
    CorruptMetadata,
    LedgerLayout,
    LedgerMetadata,
    LedgerPaths,
    LedgerState,
    NoNode,
    Segment,
    VersionConflict,
    WatchEvent,
    ZkMetadataStore,
    layout_text,
)

IDS = [0, 1, 9999, 123456789, 2147483646, 2147483647, 2147483648, 4294967296, 2**63 - 1]


def ledger(ledger_id: int, **changes: object) -> LedgerMetadata:
    base = {
        "ledger_id": ledger_id,
        "ensemble_size": 2,
        "write_quorum": 2,
        "ack_quorum": 2,
        "segments": (Segment(0, ("b1:3181", "b2:3181")),),
        "custom_metadata": {"application": b"pulsar", "component": b"managed-ledger"},
    }
    return LedgerMetadata(**{**base, **changes})  # type: ignore[arg-type]


async def test_create_then_read(store: ZkMetadataStore) -> None:
    """A created ledger reads back with version 0 and the znode ctime as its creation time."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(4294967296))
    record = await ledgers.read(4294967296)
    znode = await store.get("/ledgers/000/0000/0042/9496/L7296")
    assert (ledger(4294967296), 0, znode.ctime_ms) == (
        record.metadata,
        record.version,
        record.ctime_ms,
    )


async def test_stored_ctime_wins_over_znode_ctime(store: ZkMetadataStore) -> None:
    """When the metadata carries ctime, that is the ledger's creation time."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(5, ctime=1234))
    assert (await ledgers.read(5)).ctime_ms == 1234


async def test_v2_ledgers_read_too(store: ZkMetadataStore) -> None:
    """A ledger written in the v2 text format (Pulsar ≤ 2.4) is read like a v3 one."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(6), format_version=2)
    assert (await ledgers.read(6)).metadata.format_version == 2


async def test_missing_ledger_is_no_node(store: ZkMetadataStore) -> None:
    """Reading an absent ledger raises NoNode naming its path."""
    with pytest.raises(NoNode) as err:
        await BookKeeperLedgers(store).read(7)
    assert err.value.path == "/ledgers/00/0000/L0007"


async def test_corrupt_ledger_names_the_path(store: ZkMetadataStore) -> None:
    """Garbage in a ledger znode raises CorruptMetadata with that znode's path."""
    await store.create("/ledgers/00/0000/L0007", b"garbage", make_parents=True)
    with pytest.raises(CorruptMetadata) as err:
        await BookKeeperLedgers(store).read(7)
    assert err.value.path == "/ledgers/00/0000/L0007"


async def test_close_with_cas(store: ZkMetadataStore) -> None:
    """write() is a compare-and-set: a stale version conflicts."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(8))
    closed = ledger(8, state=LedgerState.CLOSED, last_entry_id=3, length=40)
    assert await ledgers.write(closed, version=0) == 1
    with pytest.raises(VersionConflict):
        await ledgers.write(closed, version=0)
    assert closed == (await ledgers.read(8)).metadata


async def test_delete_removes_empty_parents(store: ZkMetadataStore) -> None:
    """Deleting the only ledger of a bucket removes the empty parents up to the root."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(4294967296))
    await ledgers.delete(4294967296, version=0)
    assert await store.get_children("/ledgers") == []


async def test_delete_keeps_parents_with_other_ledgers(store: ZkMetadataStore) -> None:
    """Parents that still hold another ledger stay."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(1))
    await ledgers.create(ledger(2))
    await ledgers.delete(1, version=0)
    assert await store.get_children("/ledgers/00/0000") == ["L0002"]


async def test_delete_at_stale_version_conflicts(store: ZkMetadataStore) -> None:
    """A delete at a version the metadata has moved past fails and keeps the ledger."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(3))
    await ledgers.write(ledger(3, state=LedgerState.IN_RECOVERY), version=0)
    with pytest.raises(VersionConflict):
        await ledgers.delete(3, version=0)
    assert (await ledgers.read(3)).metadata.state == LedgerState.IN_RECOVERY


async def test_delete_missing_is_no_node(store: ZkMetadataStore) -> None:
    """Deleting an absent ledger raises NoNode (the caller decides it counts as deleted)."""
    with pytest.raises(NoNode):
        await BookKeeperLedgers(store).delete(3, version=0)


async def test_read_and_watch_fires_on_delete(store: ZkMetadataStore) -> None:
    """A watched ledger fires DELETED when its znode goes."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(3))
    record, fired = await ledgers.read_and_watch(3)
    await ledgers.delete(3, version=record.version)
    assert await asyncio.wait_for(fired, 10) == WatchEvent.DELETED


async def add_special_znodes(store: ZkMetadataStore, root: str) -> None:
    for path in (
        "available/readonly",
        "cookies/b1:3181",
        "LAYOUT",
        "INSTANCEID",
        "underreplication/ledgers/0000",
        "idgen/ID-0000000001",
        "idgen-long/HOB-0000000001",
        "ID-0000000042",
        "zz/0000/L0001",
        "0000/0000/L0001",
    ):
        await store.create(f"{root}/{path}", b"x", make_parents=True)


@pytest.mark.parametrize(
    ("layout", "ids"),
    [
        (LedgerLayout.HIERARCHICAL, IDS),
        (LedgerLayout.LONG_HIERARCHICAL, IDS),
        (LedgerLayout.LEGACY_HIERARCHICAL, [i for i in IDS if i < 10**10]),
        (LedgerLayout.FLAT, [i for i in IDS if i < 10**10]),
    ],
)
async def test_iteration_finds_every_ledger(
    store: ZkMetadataStore, layout: LedgerLayout, ids: list[int]
) -> None:
    """Iteration finds every ledger, around 2^31 and beyond 2^32, skipping special znodes."""
    ledgers = BookKeeperLedgers(store, paths=LedgerPaths("/bk/ledgers", layout))
    await add_special_znodes(store, "/bk/ledgers")
    for ledger_id in ids:
        await ledgers.create(ledger(ledger_id))
    assert sorted(ids) == [ledger_id async for ledger_id in ledgers.iter_ledger_ids()]


async def test_hybrid_lists_short_trees_first(store: ZkMetadataStore) -> None:
    """The hybrid layout lists the 2-digit trees before the 3-digit ones, one per task."""
    ledgers = BookKeeperLedgers(store)
    await add_special_znodes(store, "/ledgers")
    for ledger_id in (1, 2147483647, 1000000000):
        await ledgers.create(ledger(ledger_id))
    top = await ledgers.top_level_nodes()
    assert top == ["00", "10", "000"]
    per_subtree = [await ledgers.ledger_ids_under(name) for name in top]
    assert per_subtree == [[1], [1000000000], [2147483647]]


async def test_iteration_of_missing_root_is_empty(store: ZkMetadataStore) -> None:
    """A root that does not exist holds no ledgers."""
    assert [i async for i in BookKeeperLedgers(store).iter_ledger_ids()] == []


async def test_subtrees_at_level_two(store: ZkMetadataStore) -> None:
    """Level-2 subtrees split the work finer; together they list every ledger once."""
    ledgers = BookKeeperLedgers(store)
    ids = [1, 10001, 20002, 2147483647, 4294967296]
    for ledger_id in ids:
        await ledgers.create(ledger(ledger_id))
    subtrees = await ledgers.subtrees(level=2)
    assert subtrees == ["00/0000", "00/0001", "00/0002", "000/0000"]
    found = [i for subtree in subtrees for i in await ledgers.ledger_ids_under(subtree)]
    assert ids == found


async def test_deep_subtrees_stop_above_the_leaves(store: ZkMetadataStore) -> None:
    """Asking for more levels than a layout has stops one level above the ledger znodes."""
    ledgers = BookKeeperLedgers(store)
    await ledgers.create(ledger(1))
    await ledgers.create(ledger(4294967296))
    assert await ledgers.subtrees(level=9) == ["00/0000", "000/0000/0042/9496"]


@pytest.mark.parametrize("subtree", ["0000", "00/0000/L0001", "00/x", "idgen"])
async def test_ledger_ids_under_rejects_non_subtrees(store: ZkMetadataStore, subtree: str) -> None:
    """A prefix that is not a ledger subtree raises InvalidArgument naming subtree."""
    with pytest.raises(InvalidArgument) as err:
        await BookKeeperLedgers(store).ledger_ids_under(subtree)
    assert err.value.field == "subtree"


@pytest.mark.parametrize("layout", list(LedgerLayout))
async def test_read_layout(store: ZkMetadataStore, layout: LedgerLayout) -> None:
    """The LAYOUT znode BookKeeper writes names the layout to iterate."""
    await store.create("/ledgers/LAYOUT", layout_text(layout), make_parents=True)
    assert layout == await BookKeeperLedgers(store).read_layout()


async def test_bad_layout_is_corrupt(store: ZkMetadataStore) -> None:
    """An unknown factory in LAYOUT raises CorruptMetadata naming the znode."""
    await store.create("/ledgers/LAYOUT", b"2\norg.example.Other:1", make_parents=True)
    with pytest.raises(CorruptMetadata) as err:
        await BookKeeperLedgers(store).read_layout()
    assert err.value.path == "/ledgers/LAYOUT"
