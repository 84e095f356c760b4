"""The watched owner cache: about one read per verdict, never a stale "not in use"."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from devstack.zookeeper import ZooKeeperServer
from services.metadata.pulsar_formats import ManagedLedgerInfo, encode_managed_ledger_info
from services.metadata.zookeeper.store import ZkMetadataStore
from services.verifier.model import Decision, SkipReason
from services.verifier.owners import OwnerCache, decode_ml
from services.verifier.ports import Znode, read_each
from tests.helpers import assert_eventually
from tests.verifier.world import World, pdli


async def test_a_steady_stream_reads_the_owner_once(world: World, parts: Any) -> None:
    """Ten verdicts on one topic: one owner read, ten ledger reads."""
    for ledger_id in range(1, 11):
        await world.ledger(ledger_id)
    await world.ml([20])
    for ledger_id in range(1, 11):
        assert (await parts.engine.verify(pdli(ledger_id))).decision == Decision.DELETE
    reads = parts.metrics.reads
    assert (reads.labels("owner")._value.get(), reads.labels("ledger")._value.get()) == (1, 10)


async def test_a_burst_for_one_topic_reads_its_owner_once(world: World, parts: Any) -> None:
    """Fifty concurrent verdicts on one topic (a marked batch arriving together) share one
    owner read."""
    await world.ml([100])
    verdicts = await asyncio.gather(*(parts.engine.verify(pdli(n)) for n in range(1, 51)))
    reads = parts.metrics.reads.labels("owner")._value.get()
    assert ({v.skip_reason for v in verdicts}, reads) == ({SkipReason.NOT_FOUND}, 1)


async def test_a_change_by_another_session_is_seen_at_once(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """After another client lists the ledger again, the very next verdict says IN_USE."""
    await world.ledger(1)
    await world.ml([2])
    assert (await parts.engine.verify(pdli(1))).decision == Decision.DELETE
    async with ZkMetadataStore.connect(zk.address, request_timeout=2.0) as other:
        await World(other).ml([1, 2])
    assert (await parts.engine.verify(pdli(1))).skip_reason == SkipReason.IN_USE


async def test_absence_is_never_cached(world: World, parts: Any) -> None:
    """A deleted topic is read again each time: once it exists and lists the ledger, IN_USE."""
    await world.ledger(1)
    assert (await parts.engine.verify(pdli(1))).decision == Decision.DELETE
    await world.ml([1])
    assert (await parts.engine.verify(pdli(1))).skip_reason == SkipReason.IN_USE


async def test_a_lost_connection_empties_the_cache(
    world: World, parts: Any, zk: ZooKeeperServer
) -> None:
    """After the server restarts (watches may be lost), cached owners are read again."""
    await world.ledger(1)
    await world.ml([2])
    await parts.engine.verify(pdli(1))
    zk.stop()
    zk.start()

    async def decided_again() -> None:
        assert (await parts.engine.verify(pdli(1))).decision == Decision.DELETE

    await assert_eventually(decided_again, timeout=30, interval=0.2)
    # The owner was read again after the restart. How many entries the cache holds at this
    # instant depends on when the client reports the lost connection, so only its bound is
    # checked.
    assert parts.owners.stats.reads >= 2
    assert len(parts.owners) <= 1


class _LateNotificationStore:
    """A fake `ZnodeStore` that reproduces aiozk's callback order: the owner's change
    notification arrives in the same step as the answer to a later read, and reaches the
    watch callback two loop hops later while the reader resumes after one."""

    def __init__(self, owner_path: str, first: bytes) -> None:
        self.owner_path = owner_path
        self.owner_data = first
        self.watch: Any = None
        self.change_on_next_read: bytes | None = None

    async def read(self, path: str, *, watch: Any = None) -> Znode | None:
        if path == self.owner_path:
            self.watch = watch
            return Znode(self.owner_data, 1, 0)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[None] = loop.create_future()

        def read_loop_step() -> None:
            if self.change_on_next_read is not None and self.watch is not None:
                self.owner_data, watch = self.change_on_next_read, self.watch
                loop.call_soon(lambda: loop.call_soon(watch, self.owner_path))
            answer.set_result(None)

        loop.call_soon(read_loop_step)
        await answer
        return None  # the ledger znode itself does not matter here

    async def read_many(self, paths: Sequence[str]) -> list[Znode | Exception | None]:
        return await read_each(self, paths)

    def unwatch(self, path: str, watch: Any) -> None:
        pass

    def epoch(self) -> int:
        return 0

    async def watch_node(self, path: str, watch: Any) -> bool:
        raise NotImplementedError

    async def children(self, path: str, *, watch: Any = None) -> list[str] | None:
        raise NotImplementedError

    async def create(self, path: str, data: bytes) -> str:
        raise NotImplementedError

    async def create_sequential(self, prefix: str, data: bytes) -> str:
        raise NotImplementedError

    async def delete_all(self, paths: Sequence[str]) -> None:
        raise NotImplementedError

    async def delete(self, path: str) -> None:
        raise NotImplementedError


async def test_a_notification_arriving_with_the_read_is_applied_first() -> None:
    """A change notified together with the answer to the next read is seen by that read's
    cache lookup (no stale cached owner)."""
    path = "/managed-ledgers/public/default/persistent/orders"
    listed_2, listed_1 = ManagedLedgerInfo(), ManagedLedgerInfo()
    listed_2.ledgerInfo.add(ledgerId=2)
    listed_1.ledgerInfo.add(ledgerId=1)
    store = _LateNotificationStore(path, encode_managed_ledger_info(listed_2))
    cache = OwnerCache(store)
    await cache.get(path, decode_ml)
    store.change_on_next_read = encode_managed_ledger_info(listed_1)
    await store.read("/ledgers/00/0000/L0001")
    assert set((await cache.get(path, decode_ml)).refs) == {1}
