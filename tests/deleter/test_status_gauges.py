"""The deleter's status as gauges: backlogs, dead letters by reason, oldest pending age."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from services.core.errors import Unavailable
from services.core.metrics import Metrics
from services.deleter.metrics import DeleterMetrics
from services.deleter.pool import PoolStatus
from services.deleter.status_gauges import StatusGauges

IDLE = PoolStatus(0, 0, 0)


class FakeStatus:
    """The admin's two status calls, with counts of how often each ran."""

    def __init__(self) -> None:
        self.backlog = (0, 0, 0)
        self.reasons: dict[str, int] | None = {}
        self.fail: Exception | None = None
        self.scans = 0
        self.asked = asyncio.Event()

    async def backlogs(self) -> tuple[int, int, int]:
        self.asked.set()
        if self.fail is not None:
            raise self.fail
        return self.backlog

    async def dead_letters_by_reason(self) -> dict[str, int] | None:
        self.scans += 1
        return self.reasons


def make(source: FakeStatus, pool: PoolStatus = IDLE) -> tuple[StatusGauges, Metrics]:
    metrics = Metrics()
    gauges = StatusGauges(
        source,
        DeleterMetrics(metrics),
        pool_status=lambda: pool,
        interval=timedelta(seconds=30),
        clock=lambda: 1234.0,
    )
    return gauges, metrics


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_a_refresh_sets_backlogs_and_reasons() -> None:
    """Backlogs and per-reason counts become gauges; a reason never seen is 0, not absent."""
    source = FakeStatus()
    source.backlog, source.reasons = (7, 3, 5), {"forged": 4, "mismatch": 1}
    gauges, metrics = make(source, PoolStatus(2, 1, 90_500))
    assert await gauges.refresh()
    expected = (7.0, 3.0, 5.0, 4.0, 1.0, 0.0, 90.5, 1234.0)
    actual = (
        value(metrics, "tombstone_deleter_system_topic_backlog"),
        value(metrics, "tombstone_deleter_retry_topic_backlog"),
        value(metrics, "tombstone_deleter_dead_letter_backlog"),
        value(metrics, "tombstone_deleter_dead_letters", reason="forged"),
        value(metrics, "tombstone_deleter_dead_letters", reason="mismatch"),
        value(metrics, "tombstone_deleter_dead_letters", reason="retries_exhausted"),
        value(metrics, "tombstone_deleter_oldest_pending_age_seconds"),
        value(metrics, "tombstone_deleter_status_refreshed_timestamp_seconds"),
    )
    assert expected == actual


async def test_the_dead_letters_are_scanned_only_when_their_depth_changed() -> None:
    """The DLQ scan is the costly part: an unchanged depth reuses the last count, an empty
    DLQ needs no scan, and a busy subscription leaves the count to the next refresh."""
    source = FakeStatus()
    gauges, metrics = make(source)
    source.backlog, source.reasons = (0, 0, 2), {"forged": 2}
    await gauges.refresh()
    await gauges.refresh()  # same depth: no scan
    source.backlog, source.reasons = (0, 0, 3), None  # another scan holds the subscription
    await gauges.refresh()
    source.reasons = {"forged": 3}
    await gauges.refresh()
    source.backlog = (0, 0, 0)  # replayed: zero without a scan
    await gauges.refresh()
    expected = (3, 0.0)
    actual = (source.scans, value(metrics, "tombstone_deleter_dead_letters", reason="forged"))
    assert expected == actual


async def test_a_failed_refresh_keeps_the_values_and_counts_the_failure() -> None:
    """The Pulsar admin API down: values and timestamp stay, the failure counter grows."""
    source = FakeStatus()
    source.backlog = (4, 0, 0)
    gauges, metrics = make(source)
    await gauges.refresh()
    source.fail = Unavailable("admin down")
    expected = (False, 4.0, 1.0)
    actual = (
        await gauges.refresh(),
        value(metrics, "tombstone_deleter_system_topic_backlog"),
        value(metrics, "tombstone_deleter_status_refresh_failures_total"),
    )
    assert expected == actual


async def test_run_refreshes_until_stopped() -> None:
    """The loop refreshes at once and returns when the service stops."""
    source = FakeStatus()
    source.backlog = (1, 0, 0)
    gauges, metrics = make(source)
    stopping = asyncio.Event()
    task = asyncio.create_task(gauges.run(stopping))
    await asyncio.wait_for(source.asked.wait(), 5)
    stopping.set()
    await asyncio.wait_for(task, 5)
    assert value(metrics, "tombstone_deleter_system_topic_backlog") == 1.0
