"""The marking flow over fakes of the marker's own ports: what is sent, written and returned."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

import pytest

from services.core.errors import Conflict, FailedPrecondition, NotFound, Unavailable
from services.marker.believe import BackgroundBeliever
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker, MarkingSettings
from services.marker.metrics import MarkerMetrics
from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    ManagedLedgerInfo,
    encode_managed_ledger_info,
)
from services.systopic import PROP_LEDGER_ID, PROP_LEDGER_TYPE
from tests.helpers import assert_eventually
from tests.marker.builders import (
    CURSOR_PATH,
    ML_PATH,
    UID_LSB,
    UID_MSB,
    cursor_bytes,
    ledger,
    ml_bytes,
    ml_ledger_ids,
)
from tests.marker.conftest import SETTINGS, cursor_request, ml_request
from tests.marker.fakes import FakeBelieveClient, FakePublisher, FakeStore
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd


async def test_marks_referenced_ledgers_and_writes_once(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Every requested ledger gets one LEDGER PDLI; one CAS at the read version removes them."""
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2), ledger(3)), version=7)
    result = await marker.mark(ml_request(1, 2))
    assert result.marked == [(1, (_pd.LEDGER,)), (2, (_pd.LEDGER,))]
    assert store.writes == [(ML_PATH, 7)]
    assert ml_ledger_ids(store.nodes[ML_PATH].data) == [3]
    assert (
        result.read_version,
        result.new_version,
        result.fence_token,
        result.written,
        result.pdlis_sent,
    ) == (7, 8, 8, True, 2)


async def test_pdli_fields(marker: Marker, store: FakeStore, publisher: FakePublisher) -> None:
    """A PDLI carries the owner, fence token, times, source, marker id and cluster."""
    store.put(ML_PATH, ml_bytes(ledger(1)), version=3)
    await marker.mark(ml_request(1))
    [pdli] = publisher.pdlis
    assert (pdli.ledger_id, pdli.ledger_type, pdli.component) == (1, _pd.LEDGER, _pd.MANAGED_LEDGER)
    assert (
        pdli.topic_name,
        pdli.managed_ledger_name,
    ) == ("persistent://public/default/orders", "public/default/persistent/orders")
    assert (
        pdli.fence_token,
        pdli.source,
        pdli.marker_id,
        pdli.cluster,
        pdli.request_id,
    ) == (4, _pd.BROKER, "marker-test", "test-cluster", "req-1")
    assert pdli.not_before_ms - pdli.marked_at_ms == 5000
    assert {"1"} == {
        publisher.accepted[0].partition_key,
        publisher.accepted[0].properties[PROP_LEDGER_ID],
    }


@pytest.mark.parametrize(
    ("offload", "tiers"),
    [
        (None, (_pd.LEDGER,)),
        ("started", (_pd.LEDGER, _pd.OFFLOAD_LEDGER)),
        ("complete", (_pd.LEDGER, _pd.OFFLOAD_LEDGER)),
        ("bk_deleted", (_pd.OFFLOAD_LEDGER,)),
    ],
)
async def test_tiers_follow_the_offload_context(
    marker: Marker,
    store: FakeStore,
    publisher: FakePublisher,
    offload: str | None,
    tiers: tuple[int, ...],
) -> None:
    """LEDGER unless bookkeeperDeleted; OFFLOAD_LEDGER whenever a uuid is set, complete or not."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload=offload)))
    result = await marker.mark(ml_request(1))
    assert [(1, tiers)] == result.marked
    assert list(tiers) == [p.ledger_type for p in publisher.pdlis]
    assert [tiers[-1] == _pd.OFFLOAD_LEDGER] * len(tiers) == [
        p.HasField("offload_context") for p in publisher.pdlis
    ]


async def test_offload_context_is_copied(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """The OFFLOAD_LEDGER PDLI carries the uuid, driver and bucket of the listed context."""
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete")))
    await marker.mark(ml_request(1))
    ctx = publisher.pdlis[1].offload_context
    assert (
        ctx.uuid_msb,
        ctx.uuid_lsb,
        ctx.driver_name,
        dict(ctx.driver_metadata),
        ctx.complete,
        ctx.bookkeeper_deleted,
    ) == (UID_MSB, UID_LSB, "aws-s3", {"bucket": "offload-bucket"}, True, False)
    assert publisher.accepted[1].properties[PROP_LEDGER_TYPE] == "OFFLOAD_LEDGER"


async def test_unreferenced_ledgers_are_refused_and_not_sent(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A ledger the owner does not list gets NOT_REFERENCED and no PDLI."""
    store.put(ML_PATH, ml_bytes(ledger(1)))
    result = await marker.mark(ml_request(1, 9))
    assert [n.ledger_id for n in result.not_marked] == [9]
    assert [n.reason for n in result.not_marked] == [_mk.NOT_REFERENCED]
    assert [p.ledger_id for p in publisher.pdlis] == [1]


async def test_nothing_referenced_means_nothing_sent_or_written(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """With no referenced ledger, nothing is sent and the znode is not written."""
    store.put(ML_PATH, ml_bytes(ledger(1)), version=2)
    result = await marker.mark(ml_request(5))
    assert (
        publisher.accepted,
        store.writes,
        result.written,
        result.new_version,
    ) == ([], [], False, 2)


async def test_only_fully_accepted_ledgers_are_unlinked(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A ledger with one refused tier stays listed (SEND_FAILED); the others leave."""
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2, offload="complete"), ledger(3)))
    publisher.refuse = lambda m: m.properties["ledgerType"] == "OFFLOAD_LEDGER"
    result = await marker.mark(ml_request(1, 2, 3))
    assert [i for i, _ in result.marked] == [1, 3]
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(2, _mk.SEND_FAILED)]
    assert ml_ledger_ids(store.nodes[ML_PATH].data) == [2]


async def test_all_sends_failed_means_no_write(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """When no ledger is fully accepted the owner znode is not written."""
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2)))
    publisher.refuse = lambda m: True
    result = await marker.mark(ml_request(1, 2))
    assert (store.writes, result.written, len(result.not_marked)) == ([], False, 2)


async def test_expected_version_mismatch_sends_nothing(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A caller holding another version gets a conflict before anything is sent."""
    store.put(ML_PATH, ml_bytes(ledger(1)), version=4)
    with pytest.raises(Conflict, match="version is 4, the caller expected 3"):
        await marker.mark(ml_request(1, expected_version=3))
    assert (publisher.accepted, store.writes) == ([], [])


async def test_cas_conflict_is_a_conflict_with_nothing_unlinked(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A lost compare-and-set raises Conflict naming the sent PDLIs; the list is unchanged."""
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2)))
    store.fail_writes_with = Conflict(f"{ML_PATH}: version is not 0")
    with pytest.raises(Conflict, match=r"PDLIs for ledgers \[1, 2\] are on the system topic"):
        await marker.mark(ml_request(1, 2))
    assert ml_ledger_ids(store.nodes[ML_PATH].data) == [1, 2]
    assert len(publisher.accepted) == 2


async def test_store_down_at_write_is_unavailable(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A write that fails with the store unavailable reports an unknown outcome."""
    store.put(ML_PATH, ml_bytes(ledger(1)))
    store.fail_writes_with = Unavailable("connection lost")
    with pytest.raises(Unavailable, match="may or may not have landed"):
        await marker.mark(ml_request(1))


async def test_unknown_owner_is_not_found(marker: Marker) -> None:
    """A missing owner znode is NOT_FOUND for broker requests."""
    with pytest.raises(NotFound):
        await marker.mark(ml_request(1))


async def test_caller_writes_leaves_the_znode_alone(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Caller-writes sends the PDLIs with token v+1 and writes nothing."""
    store.put(ML_PATH, ml_bytes(ledger(1)), version=5)
    result = await marker.mark(ml_request(1, caller_writes=True))
    assert (
        store.writes,
        result.written,
        result.new_version,
        result.fence_token,
    ) == ([], False, 5, 6)
    assert [p.fence_token for p in publisher.pdlis] == [6]


async def test_reconciler_marks_only_unreferenced_ledgers(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Reconciler requests mark unreferenced ledgers, refuse listed ones, and write nothing."""
    store.put(ML_PATH, ml_bytes(ledger(1)), version=3)
    result = await marker.mark(ml_request(1, 2, source=_pd.RECONCILER))
    assert result.marked == [(2, (_pd.LEDGER,))]
    assert [(n.ledger_id, n.reason) for n in result.not_marked] == [(1, _mk.STILL_REFERENCED)]
    assert (store.writes, result.fence_token) == ([], 3)
    assert [p.source for p in publisher.pdlis] == [_pd.RECONCILER]


async def test_reconciler_accepts_an_absent_owner(marker: Marker, publisher: FakePublisher) -> None:
    """Orphans of a deleted topic: the owner is gone, every ledger is unreferenced."""
    result = await marker.mark(ml_request(4, source=_pd.RECONCILER))
    assert (result.marked, publisher.pdlis[0].fence_token) == ([(4, (_pd.LEDGER,))], 0)


async def test_retry_at_the_same_version_reuses_accepted_pdlis(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """After a failed write, a retry at the same version counts the earlier receipts and sends
    nothing again."""
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2)))
    store.fail_writes_with = Unavailable("down")
    with pytest.raises(Unavailable):
        await marker.mark(ml_request(1, 2))
    store.fail_writes_with = None
    result = await marker.mark(ml_request(1, 2))
    assert (
        len(publisher.accepted),
        [i for i, _ in result.marked],
        ml_ledger_ids(store.nodes[ML_PATH].data),
    ) == (2, [1, 2], [])


async def test_late_write_resends_fresh_pdlis(store: FakeStore, publisher: FakePublisher) -> None:
    """A write landing after the retry window sends the PDLIs again, with later times."""
    settings = MarkingSettings(
        marker_id="m",
        retry_window=timedelta(milliseconds=50),
        pause_after_send=timedelta(milliseconds=80),
    )
    journal = ReceiptJournal(retry_window=settings.retry_window)
    marker = Marker(store=store, publisher=publisher, journal=journal, settings=settings)
    store.put(ML_PATH, ml_bytes(ledger(1)))
    await marker.mark(ml_request(1))
    first, second = publisher.pdlis
    assert (
        first.ledger_id,
        second.ledger_id,
        second.marked_at_ms > first.marked_at_ms,
    ) == (1, 1, True)


async def test_same_owner_calls_are_serialised(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """Two calls on one owner: the second reads the first one's write (no conflict)."""
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2)))
    first, second = await asyncio.gather(marker.mark(ml_request(1)), marker.mark(ml_request(2)))
    assert (
        first.read_version,
        second.read_version,
        ml_ledger_ids(store.nodes[ML_PATH].data),
    ) == (0, 1, [])


async def test_different_owners_run_concurrently(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """While one owner's sends are held, another owner's call reaches the publisher too."""
    store.put(ML_PATH, ml_bytes(ledger(1)))
    store.put(CURSOR_PATH, cursor_bytes(9))
    publisher.gate = asyncio.Event()
    calls = asyncio.gather(marker.mark(ml_request(1)), marker.mark(cursor_request(9)))

    async def both_sending() -> None:
        assert publisher.calls == 2

    await assert_eventually(both_sending)
    publisher.gate.set()
    await calls
    assert len(publisher.accepted) == 2


async def test_believe_failure_does_not_fail_the_call(
    store: FakeStore, publisher: FakePublisher, journal: ReceiptJournal
) -> None:
    """A verifier that is down costs a metric, never the Mark."""
    metrics = MarkerMetrics()
    believer = BackgroundBeliever(FakeBelieveClient(fail=True), metrics)
    marker = Marker(
        store=store,
        publisher=publisher,
        journal=journal,
        settings=SETTINGS,
        believer=believer,
        metrics=metrics,
    )
    store.put(ML_PATH, ml_bytes(ledger(1)))
    result = await marker.mark(ml_request(1))
    await believer.aclose()
    assert [i for i, _ in result.marked] == [1]


async def test_unlinked_ledgers_are_reported_to_the_believed_set(
    store: FakeStore, publisher: FakePublisher, journal: ReceiptJournal
) -> None:
    """After the write, the marked PDLIs are reported to the verifier."""
    client = FakeBelieveClient()
    believer = BackgroundBeliever(client, MarkerMetrics())
    marker = Marker(
        store=store, publisher=publisher, journal=journal, settings=SETTINGS, believer=believer
    )
    store.put(ML_PATH, ml_bytes(ledger(1), ledger(2, offload="started")))
    await marker.mark(ml_request(1, 2))
    await asyncio.sleep(0.01)
    assert [[(p.ledger_id, p.ledger_type) for p in r] for r in client.reports] == [
        [(1, 1), (2, 1), (2, 2)]
    ]


class _SlowBelieveClient:
    """A verifier whose Believe answers after `delay` seconds (or never, for `None`)."""

    def __init__(self, delay: float | None) -> None:
        self.delay = delay
        self.reports: list[int] = []

    async def believe(self, pdlis: Sequence[_pd.PendingDeleteLedgerInfo]) -> None:
        if self.delay is None:
            await asyncio.Event().wait()
        else:
            await asyncio.sleep(self.delay)
        self.reports.append(len(pdlis))


async def test_close_lets_reports_in_flight_land() -> None:
    """A marker stopped right after its last Mark call still reports that call's ledgers."""
    client = _SlowBelieveClient(0.05)
    believer = BackgroundBeliever(client, MarkerMetrics())
    believer.submit([_pd.PendingDeleteLedgerInfo(ledger_id=1).SerializeToString()])
    await believer.aclose()
    assert client.reports == [1]


async def test_close_cancels_reports_that_outlive_the_grace() -> None:
    """A verifier that never answers holds a stop for the grace only."""
    client = _SlowBelieveClient(None)
    believer = BackgroundBeliever(client, MarkerMetrics())
    believer.submit([_pd.PendingDeleteLedgerInfo(ledger_id=1).SerializeToString()])
    await asyncio.wait_for(believer.aclose(grace=0.05), timeout=5)
    assert client.reports == []


async def test_metrics_count_pdlis_calls_unlinks_and_conflicts(
    store: FakeStore, publisher: FakePublisher, journal: ReceiptJournal
) -> None:
    """PDLIs by tier, failures, calls by outcome, unlinked ledgers, conflicts and latency."""
    from services.core.metrics import Metrics

    registry = Metrics()
    marker = Marker(
        store=store,
        publisher=publisher,
        journal=journal,
        settings=SETTINGS,
        metrics=MarkerMetrics(registry),
    )
    store.put(ML_PATH, ml_bytes(ledger(1, offload="started"), ledger(2), ledger(3)))
    publisher.refuse = lambda m: m.partition_key == "2"
    await marker.mark(ml_request(1, 2))
    store.fail_writes_with = Conflict("lost")
    with pytest.raises(Conflict):
        await marker.mark(ml_request(3))

    def value(name: str, **labels: str) -> float | None:
        return registry.registry.get_sample_value(name, labels)

    assert (
        value("tombstone_marker_pdlis_sent_total", tier="ledger"),
        value("tombstone_marker_pdlis_sent_total", tier="offload_ledger"),
        value("tombstone_marker_pdli_send_failures_total", tier="ledger"),
        value("tombstone_marker_mark_calls_total", outcome="partial"),
        value("tombstone_marker_mark_calls_total", outcome="conflict"),
        value("tombstone_marker_ledgers_unlinked_total"),
        value("tombstone_marker_conflicts_total"),
        value("tombstone_marker_mark_seconds_count"),
    ) == (2.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0)


async def test_a_shadow_topic_is_refused_with_nothing_sent_or_written(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    """A shadow topic's ML (PIP-180, `ShadowManagedLedgerImpl`: `PULSAR.SHADOW_SOURCE`, a copy
    of the source's list) owns no ledgers: marking them on it is refused; the source marks."""
    info = ManagedLedgerInfo()
    info.ledgerInfo.extend([ledger(1), ledger(2)])
    info.properties.add(key=SHADOW_SOURCE, value="persistent://public/default/source")
    store.put(ML_PATH, encode_managed_ledger_info(info), version=4)
    with pytest.raises(FailedPrecondition, match="shadow topic of persistent://public/default/"):
        await marker.mark(ml_request(1))
    assert (publisher.pdlis, store.writes) == ([], [])
