"""A publish that fails leaves the owner's entry where it was, and the change is sent again
(the real ZooKeeper; the publisher port's fake, which refuses or raises on demand)."""

from __future__ import annotations

from collections.abc import Sequence

from devstack.zookeeper import ZooKeeperServer
from services.marker.follower.index import ledger_ids
from services.marker.follower.metrics import FollowerMetrics
from services.systopic import OutgoingMessage, SendResult
from tests.follower.live import counter, follower_indexing
from tests.helpers import assert_eventually
from tests.marker.builders import ML_PATH, ledger, ml_bytes
from tests.marker.fakes import FakePublisher
from tests.marker.live import zk_store


class FailingTwice(FakePublisher):
    """Raises on the first call, refuses every message on the second, then accepts."""

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        if self.calls == 0:
            self.calls += 1
            raise ConnectionError("producer closed")
        refusing = self.calls == 1
        self.refuse = lambda _message: refusing
        return await super().publish(messages)


async def test_failed_publishes_are_retried_and_hold_the_index_back(zk: ZooKeeperServer) -> None:
    publisher = FailingTwice()
    metrics = FollowerMetrics()
    async with zk_store(zk) as store:
        await store.create(ML_PATH, ml_bytes(ledger(1), ledger(2)), make_parents=True)
        async with follower_indexing(store, publisher, metrics, ML_PATH) as follower:
            await store.set(ML_PATH, ml_bytes(ledger(2)), version=0)

            async def sent_once_accepted() -> None:
                assert [p.ledger_id for p in publisher.pdlis] == [1]

            await assert_eventually(sent_once_accepted, timeout=15)
            entry = follower.index.get(ML_PATH)
            assert entry is not None
            assert list(ledger_ids(entry)) == [2]
            assert (publisher.calls, counter(metrics.publish_failures)) == (3, 2)
