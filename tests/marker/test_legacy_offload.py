"""Offload contexts written by Pulsar 2.1, and a marker that sends no offload-tier intents."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from services.core.config import OffloadDefaults
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker
from tests.marker.builders import ML_PATH, UID_LSB, UID_MSB, ledger, ml_bytes, ml_ledger_ids
from tests.marker.conftest import SETTINGS, ml_request
from tests.marker.fakes import FakePublisher, FakeStore
from tombstone.formats.managed_ledger_pb2 import ManagedLedgerInfo
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

LedgerInfo = ManagedLedgerInfo.LedgerInfo


def pulsar_21_ledger(ledger_id: int) -> LedgerInfo:
    """An offloaded ledger as Pulsar 2.1 lists it: `ManagedLedgerImpl.offloadLoop` of 2.1 sets
    only `uidMsb`, `uidLsb` and `complete` (driverMetadata arrived in 2.2.0)."""
    info = LedgerInfo(ledgerId=ledger_id, entries=10, size=1000, timestamp=1_700_000_000_000)
    ctx = info.offloadContext
    ctx.uidMsb, ctx.uidLsb, ctx.complete = UID_MSB, UID_LSB, True
    return info


def _marker(store: FakeStore, publisher: FakePublisher, **settings: object) -> Marker:
    return Marker(
        store=store,
        publisher=publisher,
        journal=ReceiptJournal(retry_window=timedelta(seconds=60)),
        settings=replace(SETTINGS, **settings),  # type: ignore[arg-type]
    )


async def test_a_21_context_gets_the_default_driver_and_bucket() -> None:
    """Both PDLIs of a 2.1-offloaded ledger name the operator's default driver and bucket."""
    store, publisher = FakeStore(), FakePublisher()
    store.put(ML_PATH, ml_bytes(pulsar_21_ledger(1), ledger(2)), version=1)
    marker = _marker(store, publisher, offload_defaults=OffloadDefaults("aws-s3", "legacy"))
    result = await marker.mark(ml_request(1))
    assert result.marked == [(1, (_pd.LEDGER, _pd.OFFLOAD_LEDGER))]
    contexts = [
        (p.offload_context.driver_name, dict(p.offload_context.driver_metadata))
        for p in publisher.pdlis
    ]
    assert contexts == [("aws-s3", {"bucket": "legacy"})] * 2


async def test_a_21_context_without_a_default_is_sent_as_pulsar_wrote_it() -> None:
    """Without a default the context stays empty: the verifier answers UNSUPPORTED for it."""
    store, publisher = FakeStore(), FakePublisher()
    store.put(ML_PATH, ml_bytes(pulsar_21_ledger(1), ledger(2)), version=1)
    await _marker(store, publisher).mark(ml_request(1))
    offload = [p for p in publisher.pdlis if p.ledger_type == _pd.OFFLOAD_LEDGER]
    assert [
        (p.offload_context.driver_name, dict(p.offload_context.driver_metadata)) for p in offload
    ] == [("", {})]


async def test_contexts_with_driver_metadata_keep_theirs() -> None:
    """The default never overrides what a 2.2+ context names."""
    store, publisher = FakeStore(), FakePublisher()
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete"), ledger(2)), version=1)
    marker = _marker(store, publisher, offload_defaults=OffloadDefaults("aws-s3", "legacy"))
    await marker.mark(ml_request(1))
    assert {"offload-bucket"} == {
        p.offload_context.driver_metadata["bucket"] for p in publisher.pdlis
    }


async def test_without_the_offload_tier_offloaded_ledgers_are_not_unlinked() -> None:
    """A marker that sends no OFFLOAD_LEDGER intents refuses offloaded ledgers (CANNOT_UNLINK)
    and unlinks the others: nothing leaves the list without an intent for each of its tiers."""
    store, publisher = FakeStore(), FakePublisher()
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete"), ledger(2), ledger(3)), version=1)
    result = await _marker(store, publisher, offload_tier=False).mark(ml_request(1, 2))
    assert result.marked == [(2, (_pd.LEDGER,))]
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(1, _mk.CANNOT_UNLINK)]
    assert ml_ledger_ids(store.nodes[ML_PATH].data) == [1, 3]
    assert {2} == {p.ledger_id for p in publisher.pdlis}
