"""`SubscriptionWatch` against the devstack broker's admin API: present, missing on one
partition, and unknown (the broker stopped), where the last answer stands only for the
grace period."""

from __future__ import annotations

from datetime import timedelta

import aiohttp
import pytest

from devstack.pulsar import PulsarBrokerProcess
from services.core.errors import Unavailable
from services.systopic.admin import PulsarAdmin
from services.systopic.ports import OutgoingMessage, SendResult
from services.systopic.setup import SetupPlan, prepare_topics
from services.systopic.subscription_watch import GatedPublisher, SubscriptionWatch, WatchSettings

TOPIC = "persistent://pulsar/system/__ledger_deletion"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class _Sink:
    """An `IntentPublisher` that accepts everything (only the gate is under test)."""

    producer_name = "sink"

    async def publish(self, messages: object) -> list[SendResult]:
        return [SendResult(message_id="1:1:0:-1")]

    async def close(self) -> None:
        return None


def _watch(admin: PulsarAdmin, clock: _Clock) -> SubscriptionWatch:
    settings = WatchSettings(
        topic=TOPIC,
        subscription="tombstone-deleter",
        partitions=2,
        unknown_grace=timedelta(seconds=60),
    )
    return SubscriptionWatch(admin, settings, clock=clock)


async def test_missing_then_present_then_missing_on_one_partition(
    broker: PulsarBrokerProcess,
) -> None:
    clock = _Clock()
    async with aiohttp.ClientSession() as http:
        watch = _watch(PulsarAdmin(http, broker.admin_url), clock)
        broker.control.create_partitioned_topic(TOPIC, 2)
        assert not await watch.check()
        assert "missing on" in (watch.unready_reason() or "")
        gated = GatedPublisher(_Sink(), watch)
        with pytest.raises(Unavailable, match="tombstone setup"):
            await gated.publish([OutgoingMessage(b"x", "1")])
        prepare_topics(SetupPlan.for_topic(broker.admin_url, TOPIC, 2))
        assert await watch.check()
        assert (await gated.publish([OutgoingMessage(b"x", "1")]))[0].ok
        broker.control.delete_subscription(f"{TOPIC}-partition-1", "tombstone-deleter")
        assert not await watch.check()
        assert f"{TOPIC}-partition-1" in (watch.unready_reason() or "")


async def test_unknown_keeps_the_last_answer_only_for_the_grace(
    broker: PulsarBrokerProcess,
) -> None:
    prepare_topics(SetupPlan.for_topic(broker.admin_url, TOPIC, 2))
    clock = _Clock()
    async with aiohttp.ClientSession() as http:
        watch = _watch(PulsarAdmin(http, broker.admin_url, timeout=2), clock)
        assert await watch.check()
        broker.stop()
        clock.now += 30
        assert await watch.check(), "within the grace the last answer stands"
        clock.now += 31
        assert not await watch.check()
        assert "admin API unreachable" in (watch.unready_reason() or "")


async def test_unknown_at_start_is_not_present() -> None:
    """Never confirmed (nothing answers): nothing may be published."""
    async with aiohttp.ClientSession() as http:
        watch = _watch(PulsarAdmin(http, "http://127.0.0.1:9", timeout=2), _Clock())
        assert not await watch.check()
        assert watch.unready_reason() is not None
