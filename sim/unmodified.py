"""The unmodified brokers' workload: released Pulsar, which never calls the marker. Each
writes the shorter metadata itself, then deletes what it dropped (each tier), and a drawn
share of those deletes fails and is never retried; only the follower sees the unlinks.
"""

from __future__ import annotations

from services.metadata.offload import data_object_key, index_object_key, offload_uuid
from services.metadata.pulsar_formats import ManagedCursorInfo, ManagedLedgerInfo
from services.metadata.pulsar_names import cursor_path, managed_ledger_path
from sim.pulsar import BUCKET, Cluster, cursor_meta
from sim.s3 import S3
from sim.scheduler import Scheduler
from sim.state import TopicState


class UnmodifiedBrokers:
    """The actions of an unmodified broker on a topic, as `World.broker_topic` draws them."""

    def __init__(
        self, sched: Scheduler, cluster: Cluster, s3: S3, delete_failure_share: float
    ) -> None:
        self.sched = sched
        self.cluster = cluster
        self.s3 = s3
        self.delete_failure_share = delete_failure_share
        """Of the brokers' own deletes, the share that fails (never retried)."""

    async def deletes_ledger(self, t: TopicState, ledger_id: int) -> None:
        """An unmodified broker deletes a ledger it unlinked itself (`asyncDeleteLedger`):
        after its metadata write, and a drawn share of the time it fails, never retried."""
        await self.sched.delay()
        if self.sched.chance(self.delete_failure_share):
            self.sched.log(f"broker-{t.broker} own delete of [{ledger_id}] failed")
            return
        path = self.cluster.ledger_path(ledger_id)
        if self.cluster.zk.stat(path) is not None:
            self.cluster.zk.delete(path, version=-1, by="pulsar")

    async def _deletes_offloaded(self, t: TopicState, ledger_id: int, uuid: str) -> None:
        """The offloaded copy of a trimmed ledger (`offloader.deleteOffloaded`), same fate."""
        await self.sched.delay()
        if self.sched.chance(self.delete_failure_share):
            self.sched.log(f"broker-{t.broker} own delete of {uuid}-ledger-{ledger_id} failed")
            return
        objects = self.s3.buckets[BUCKET]
        for key in (data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id)):
            if key in objects:
                self.s3.on_delete(BUCKET, key, "pulsar")
                del objects[key]

    async def _deletes_entries(
        self, t: TopicState, entries: list[ManagedLedgerInfo.LedgerInfo]
    ) -> None:
        for entry in entries:
            ctx = entry.offloadContext if entry.HasField("offloadContext") else None
            if ctx is None or not (ctx.complete and ctx.bookkeeperDeleted):
                await self.deletes_ledger(t, entry.ledgerId)
            uuid = offload_uuid(ctx) if ctx is not None and ctx.HasField("uidMsb") else None
            if uuid:
                await self._deletes_offloaded(t, entry.ledgerId, uuid)

    async def trim(self, t: TopicState) -> None:
        """`ManagedLedgerImpl.internalTrimLedgers` as released: the shorter list written at
        the version read, then the dropped ledgers deleted (each tier they had)."""
        info, version = self.cluster.ml(t.ml)
        if len(info.ledgerInfo) < 2:
            return
        count = self.sched.rng.randint(1, min(3, len(info.ledgerInfo) - 1))
        dropped = [ManagedLedgerInfo.LedgerInfo() for _ in range(count)]
        for copy, entry in zip(dropped, info.ledgerInfo[:count], strict=True):
            copy.CopyFrom(entry)
        del info.ledgerInfo[:count]
        self.cluster.write_ml(t.ml, info, version)
        self.sched.log(f"broker-{t.broker} trimmed {[e.ledgerId for e in dropped]} itself")
        await self._deletes_entries(t, dropped)

    async def cursor(self, t: TopicState) -> None:
        """`switchToNewLedger` as released: the cursor znode names the new ledger, then the
        broker deletes the old one."""
        old = self.cluster.cursor_ledger(t.ml, t.cursor)
        new = self.cluster.new_ledger(cursor_meta(t.ml, t.cursor), closed=False)
        self.cluster.write_cursor(t.ml, t.cursor, new)
        self.sched.log(f"broker-{t.broker} cursor switch {old}->{new} itself")
        if old is not None and old >= 0:
            await self.deletes_ledger(t, old)

    async def unsubscribe(self, t: TopicState, *, recreate: bool = True) -> None:
        """`asyncDeleteCursor` as released: the cursor znode deleted, then its ledger."""
        old = self.cluster.cursor_ledger(t.ml, t.cursor)
        path = cursor_path(t.ml, t.cursor)
        stat = self.cluster.zk.stat(path)
        if stat is not None:
            self.cluster.zk.delete(path, version=stat.version, by="pulsar")
        if recreate:
            self.cluster.zk.create(
                path, self.cluster.cursor_bytes(ManagedCursorInfo(cursorsLedgerId=-1))
            )
        self.sched.log(f"broker-{t.broker} unsubscribed {t.cursor} [{old}] itself")
        if old is not None and old >= 0:
            await self.deletes_ledger(t, old)

    async def delete_topic(self, t: TopicState, *, recreate: bool = True) -> bool:
        """`ManagedLedgerImpl.asyncDelete` as released: the cursor, then the ML znode, then
        every ledger (each tier); the topic is created again under the same name unless
        its namespace is being deleted. Always deleted (True)."""
        info, _ = self.cluster.ml(t.ml)
        entries = list(info.ledgerInfo)
        await self.unsubscribe(t, recreate=False)
        self.cluster.delete_other_cursors(t.ml, t.cursor)
        path = managed_ledger_path(t.ml)
        stat = self.cluster.zk.stat(path)
        if stat is not None:
            self.cluster.zk.delete(path, version=stat.version, by="pulsar")
        self.sched.log(f"broker-{t.broker} deleted topic {t.ml} itself")
        await self._deletes_entries(t, entries)
        if recreate:
            self.cluster.recreate_topic(t.ml, t.cursor, self.sched.now_ms())
        return True
