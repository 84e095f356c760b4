"""Where a ledger can be under the layouts in play, and the ledgers-root check at start."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.core.errors import InvalidArgument, StartupRefused
from services.metadata import ZkMetadataStore
from services.metadata.layout import LayoutWatch, confirm_ledgers_root
from services.metadata.paths import LedgerLayout, LedgerLocations, layout_text
from tests.helpers import assert_eventually

IDS = st.integers(min_value=0, max_value=2**63 - 1)


def test_a_hybrid_layout_has_one_path_per_id() -> None:
    """Under the default layout `LAYOUT`'s path and Pulsar's driver's path are the same."""
    assert LedgerLocations().paths(1) == ("/ledgers/00/0000/L0001",)


def test_a_long_layout_adds_pulsars_hybrid_path() -> None:
    """`PulsarLedgerManager` (Pulsar ≥ 2.10) writes the hybrid path whatever `LAYOUT` says,
    so a long-hierarchical cluster can hold id 1 at either path."""
    locations = LedgerLocations(layout=LedgerLayout.LONG_HIERARCHICAL)
    assert locations.paths(1) == ("/ledgers/000/0000/0000/0000/L0001", "/ledgers/00/0000/L0001")


def test_a_flat_layout_adds_pulsars_hybrid_path() -> None:
    """A pre-4.7 flat root keeps `L%010d` leaves; Pulsar's driver still writes hybrid paths."""
    locations = LedgerLocations(layout=LedgerLayout.FLAT)
    assert locations.paths(7) == ("/ledgers/L0000000007", "/ledgers/00/0000/L0007")


def test_the_legacy_layout_cannot_hold_ids_beyond_ten_digits() -> None:
    """Legacy 2-4-4 paths stop at 10 digits; larger ids only have the hybrid path."""
    locations = LedgerLocations(layout=LedgerLayout.LEGACY_HIERARCHICAL)
    assert locations.paths(10**10) == ("/ledgers/000/0000/0100/0000/L0000",)


@given(IDS, st.sampled_from(list(LedgerLayout)))
def test_every_path_parses_back_to_its_id(ledger_id: int, layout: LedgerLayout) -> None:
    """Each path of an id names that id, and its parents stop below the root."""
    locations = LedgerLocations(layout=layout)
    for path in locations.paths(ledger_id):
        parents = locations.parents(path)
        assert locations.ledger_id(path) == ledger_id
        assert all(p.startswith("/ledgers/") and path.startswith(p + "/") for p in parents)


def test_a_path_of_another_layout_is_refused() -> None:
    """Under the hybrid layout a long path for a short id is no ledger path of ours."""
    with pytest.raises(InvalidArgument):
        LedgerLocations().ledger_id("/ledgers/000/0000/0000/0000/L0001")


async def cluster(store: ZkMetadataStore, layout: bytes | None, managed_ledgers: bool) -> None:
    await store.create("/ledgers", b"")
    if layout is not None:
        await store.create("/ledgers/LAYOUT", layout)
    if managed_ledgers:
        await store.create("/managed-ledgers", b"")


async def test_the_root_check_reads_the_layout(store: ZkMetadataStore) -> None:
    """Root, `LAYOUT` (as `LedgerLayout.serialize` writes it) and `/managed-ledgers`
    present: the layout `LAYOUT` names."""
    await cluster(store, layout_text(LedgerLayout.LONG_HIERARCHICAL), True)
    locations = await confirm_ledgers_root(store, "/ledgers")
    assert locations == LedgerLocations("/ledgers", LedgerLayout.LONG_HIERARCHICAL)


@pytest.mark.parametrize(
    ("layout", "managed_ledgers", "says"),
    [
        (None, True, "/ledgers/LAYOUT does not exist"),
        (b"2\norg.apache.bookkeeper.meta.MSLedgerManagerFactory:1", True, "unsupported"),
        (b"garbage", True, "bad LAYOUT"),
        (layout_text(LedgerLayout.HIERARCHICAL), False, "/managed-ledgers does not exist"),
    ],
)
async def test_the_root_check_refuses_in_one_line(
    store: ZkMetadataStore, layout: bytes | None, managed_ledgers: bool, says: str
) -> None:
    """Missing `LAYOUT`, an unsupported or garbled layout, or no `/managed-ledgers`: one
    line saying which."""
    await cluster(store, layout, managed_ledgers)
    with pytest.raises(StartupRefused) as refused:
        await confirm_ledgers_root(store, "/ledgers")
    assert (says in str(refused.value), "\n" in str(refused.value)) == (True, False)


async def test_the_watch_follows_a_new_layout(store: ZkMetadataStore) -> None:
    """When `LAYOUT` is rewritten, `current` follows it; when it is deleted, `confirmed`
    turns False while the last layout stays."""
    await cluster(store, layout_text(LedgerLayout.HIERARCHICAL), True)
    watch = LayoutWatch(store, await confirm_ledgers_root(store, "/ledgers"))
    task = asyncio.create_task(watch.run())
    try:
        await store.set("/ledgers/LAYOUT", layout_text(LedgerLayout.FLAT), version=0)

        async def flat() -> None:
            assert watch.current.layout is LedgerLayout.FLAT

        await assert_eventually(flat)
        await store.delete("/ledgers/LAYOUT", version=1)

        async def unconfirmed() -> None:
            assert (watch.confirmed, watch.current.layout) == (False, LedgerLayout.FLAT)

        await assert_eventually(unconfirmed)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
