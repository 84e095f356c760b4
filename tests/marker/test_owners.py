"""Cursor and schema owners: what they reference and what unlinking writes."""

from __future__ import annotations

import pytest

from services.marker.marking import Marker
from services.metadata import decode_cursor_info, decode_schema_locator
from services.systopic.messages import decode_intent
from tests.marker.builders import CURSOR_PATH, SCHEMA_PATH, cursor_bytes, schema_bytes
from tests.marker.conftest import cursor_request, schema_request
from tests.marker.fakes import FakePublisher, FakeStore
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd


async def test_cursor_ledger_is_marked_and_replaced(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """The cursor's ledger gets a MANAGED_CURSOR PDLI; the znode then names the new ledger and
    keeps its mark-delete position."""
    store.put(CURSOR_PATH, cursor_bytes(40), version=2)
    result = await marker.mark(cursor_request(40, new_cursor_ledger_id=41))
    info = decode_cursor_info(store.nodes[CURSOR_PATH].data, path=CURSOR_PATH)
    assert (
        info.cursorsLedgerId,
        info.markDeleteLedgerId,
        info.markDeleteEntryId,
        result.new_version,
    ) == (41, 5, 7, 3)
    [pdli] = publisher.pdlis
    assert (
        pdli.component,
        pdli.managed_ledger_name,
        pdli.cursor_name,
        pdli.fence_token,
    ) == (_pd.MANAGED_CURSOR, "public/default/persistent/orders", "sub-a", 3)


async def test_cursor_without_replacement_writes_minus_one(
    marker: Marker, store: FakeStore
) -> None:
    """By default the cursor znode ends with cursorsLedgerId -1."""
    store.put(CURSOR_PATH, cursor_bytes(40))
    await marker.mark(cursor_request(40))
    assert decode_cursor_info(store.nodes[CURSOR_PATH].data, path=CURSOR_PATH).cursorsLedgerId == -1


async def test_cursor_refuses_other_ledgers(marker: Marker, store: FakeStore) -> None:
    """A ledger that is not the cursor's ledger is NOT_REFERENCED."""
    store.put(CURSOR_PATH, cursor_bytes(40))
    result = await marker.mark(cursor_request(39))
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(39, _mk.NOT_REFERENCED)]


async def test_schema_versions_leave_the_index(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Old schema ledgers leave the locator's index; the latest stays."""
    store.put(SCHEMA_PATH, schema_bytes(10, 11, 12))
    result = await marker.mark(schema_request(10, 11))
    locator = decode_schema_locator(store.nodes[SCHEMA_PATH].data, path=SCHEMA_PATH)
    assert ([e.position.ledgerId for e in locator.index], locator.info.position.ledgerId) == (
        [12],
        12,
    )
    assert (
        [i for i, _ in result.marked],
        [p.component for p in publisher.pdlis],
    ) == ([10, 11], [_pd.SCHEMA_STORAGE] * 2)
    assert {"public/default/orders"} == {p.schema_id for p in publisher.pdlis}


async def test_latest_schema_version_goes_only_with_all_others(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """The latest version's ledger alone is CANNOT_UNLINK and gets no PDLI."""
    store.put(SCHEMA_PATH, schema_bytes(10, 11))
    result = await marker.mark(schema_request(11))
    assert (
        [(n.ledger_id, n.reason) for n in result.not_marked],
        publisher.accepted,
    ) == ([(11, _mk.CANNOT_UNLINK)], [])


async def test_latest_schema_version_stays_when_another_versions_send_failed(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Every version asked, one version's PDLI not accepted: the latest stays in the index
    (and `info`) with it, CANNOT_UNLINK; the other versions leave. Unlinking the latest with
    them left a locator whose `info` named a ledger its `index` did not, which Pulsar's next
    `putSchema` dropped with no intent left (found by the simulation)."""
    store.put(SCHEMA_PATH, schema_bytes(10, 11, 12))
    publisher.refuse = lambda m: decode_intent(m.payload, m.properties).ledger_id == 11
    result = await marker.mark(schema_request(10, 11, 12))
    locator = decode_schema_locator(store.nodes[SCHEMA_PATH].data, path=SCHEMA_PATH)
    assert (
        [i for i, _ in result.marked],
        sorted((n.ledger_id, n.reason) for n in result.not_marked),
        [e.position.ledgerId for e in locator.index],
        locator.info.position.ledgerId,
    ) == ([10], [(11, _mk.SEND_FAILED), (12, _mk.CANNOT_UNLINK)], [11, 12], 12)


async def test_all_schema_versions_delete_the_locator(marker: Marker, store: FakeStore) -> None:
    """Unlinking every version deletes the locator znode (compare-and-set delete)."""
    store.put(SCHEMA_PATH, schema_bytes(10, 11), version=1)
    result = await marker.mark(schema_request(10, 11))
    assert (SCHEMA_PATH not in store.nodes, -1, 2) == (
        True,
        result.new_version,
        result.fence_token,
    )


@pytest.mark.parametrize("cursor", [True, False])
async def test_owner_znode_that_does_not_decode_is_corrupt(
    marker: Marker, store: FakeStore, cursor: bool
) -> None:
    """Garbage in the owner znode is an error, never "nothing referenced"."""
    from services.core.errors import CorruptData

    store.put(CURSOR_PATH if cursor else SCHEMA_PATH, b"\xff\xff\xff")
    request = cursor_request(1) if cursor else schema_request(1)
    with pytest.raises(CorruptData):
        await marker.mark(request)
