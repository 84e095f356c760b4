"""A topic's compaction: the `__compaction` cursor and the compacted ledger it references.

What released Pulsar does (no broker calls the marker for it):

- `TwoPhaseCompactor.phaseTwo` (`AbstractTwoPhaseCompactor` since 3.2) creates a ledger
  (`LedgerMetadataUtils.buildMetadataForCompactedLedger`: `component=compacted-ledger`), writes
  the compacted entries and closes it, then `cursor.markDelete(position,
  {CompactedTopicLedger: id})`. A broker crash in between leaves a ledger nothing ever
  referenced (apache/pulsar #12522): the reconciler's.
- `ManagedCursorImpl` persists that mark-delete: in the cursor znode while the cursor is
  closed (`persistPositionMetaStore`, `cursorsLedgerId = -1`, the properties in field 5), in
  the cursor ledger's entries while it is active. The znode written when the cursor becomes
  active (`switchToNewLedger`) carries the properties of that moment in some releases and none
  in others (drawn per topic): either way not the live value once it moves.
- `CompactedTopicImpl.newCompactedLedger` then deletes the previous compacted ledger; that
  delete can fail (a leak: the follower's, when a znode write showed the move).
- Deleting the topic removes the cursor and leaves the compacted ledger (#21745).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.metadata.pulsar_formats import ManagedCursorInfo, decode_cursor_info
from services.metadata.pulsar_names import cursor_path, managed_ledger_path
from sim.cursor_refs import (
    COMPACTED_LEDGER,
    COMPACTION_CURSOR,
    CRASH_SHARE,
    PropertyRefs,
    live_copy,
    topic_name,
)
from sim.pulsar import cursor_meta
from sim.state import CHAOS_SECONDS
from tombstone.v1 import pending_delete_pb2 as _pd

if TYPE_CHECKING:
    from sim.state import TopicState


def compacted_meta(topic: str, *, legacy: bool) -> dict[str, bytes]:
    """`LedgerMetadataUtils.buildMetadataForCompactedLedger` (none before Pulsar 2.3)."""
    if legacy:
        return {}
    return {
        "application": b"pulsar",
        "component": b"compacted-ledger",
        "pulsar/compactedTopic": topic.encode(),
        "pulsar/compactedTo": b"\x08\x01\x10\x09",  # MessageIdData{ledgerId: 1, entryId: 9}
    }


class Compaction:
    """The compactions of one topic, and its `__compaction` cursor going active and closed."""

    def __init__(self, refs: PropertyRefs, t: TopicState, *, legacy: bool) -> None:
        self.refs = refs
        self.world = refs.world
        self.t = t
        self.topic = topic_name(t)
        self.legacy = legacy
        self.path = cursor_path(t.ml, COMPACTION_CURSOR)
        self.keeps_properties = refs.rng.random() < 0.5
        """Whether the znode written as the cursor becomes active keeps the properties."""
        self.current: int | None = None
        """The live `CompactedTopicLedger` (None: no compaction since the cursor was made)."""
        refs.register(self.path, t)

    def _log(self, text: str) -> None:
        self.world.sched.log(f"broker-{self.t.broker} {text} ({self.t.ml})")

    def plant(self) -> None:
        """A compacted ledger at the start, its cursor closed."""
        ledger = self._new_ledger()
        self._write_closed(ledger, None)
        self.current = ledger

    def _new_ledger(self) -> int:
        ledger = self.world.cluster.new_ledger(
            compacted_meta(self.topic, legacy=self.legacy), closed=True
        )
        self.world.property_ledgers.add(ledger)
        return ledger

    def _cursor(self) -> ManagedCursorInfo | None:
        node = self.world.zk.nodes.get(self.path)
        if node is None:
            return None
        return decode_cursor_info(node.data, path=self.path)

    def _write_closed(self, ledger: int, keep: ManagedCursorInfo | None) -> None:
        """`persistPositionMetaStore`: `cursorsLedgerId = -1`, the live properties."""
        info = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=9)
        if keep is not None:
            info.cursorProperties.extend(keep.cursorProperties)
        info.properties.add(name=COMPACTED_LEDGER, value=ledger)
        self.refs.write(self.path, info)

    async def run(self) -> None:
        rng = self.refs.rng
        for _ in range(rng.randint(2, 5)):
            await asyncio.sleep(rng.uniform(0.0, CHAOS_SECONDS / 4))
            action = rng.choice(["compact", "compact", "toggle"])
            if action == "compact":
                await self.compact()
            else:
                await self.toggle()

    async def compact(self) -> None:
        rng = self.refs.rng
        if self.world.zk.stat(managed_ledger_path(self.t.ml)) is None:
            return  # the topic is being deleted
        info = self._cursor()
        if info is None:
            self.current = None  # the cursor went with its topic: a new one is opened
        new = self._new_ledger()
        self._log(f"compaction phase two wrote [{new}]")
        await asyncio.sleep(rng.uniform(0.0, 1.0))
        if rng.random() < CRASH_SHARE:
            self._log(f"crashed mid-compaction: [{new}] never referenced")
            return
        if self.world.zk.stat(managed_ledger_path(self.t.ml)) is None:
            self._log(f"topic deleted mid-compaction: [{new}] never referenced")
            return
        info = self._cursor()
        old = self.current
        marked = False
        if old is not None and old != new and info is not None and not self.t.unmodified:
            # A PIP-186 broker: the old ledger marked before the markDelete that unlinks it
            # (CALLER_WRITES: the znode or the cursor ledger is the broker's to write).
            node = self.world.zk.nodes.get(self.path)
            result = await self.refs.mark(
                self.t,
                _pd.COMPACTED_LEDGER,
                COMPACTION_CURSOR,
                (old,),
                caller_writes=True,
                expected_version=None if node is None else node.version,
            )
            marked = result is not None and bool(result.marked)
            info = self._cursor()
            if info is None or self.world.zk.stat(managed_ledger_path(self.t.ml)) is None:
                self._log(f"cursor or topic gone while marking: [{new}] never referenced")
                return
        if info is not None and info.cursorsLedgerId >= 0:
            self.refs.live[self.path] = frozenset({live_copy(new)})
            self._log(f"markDelete CompactedTopicLedger={new} in the cursor ledger")
        else:
            self._write_closed(new, info)
            self._log(f"markDelete CompactedTopicLedger={new} in the znode")
        self.current = new
        if old is not None and old != new and self.t.unmodified:
            # `CompactedTopicImpl.newCompactedLedger`: the previous one, never retried.
            await self.world.unmodified.deletes_ledger(self.t, old)
        elif old is not None and old != new and not marked:
            self._log(f"[{old}] not marked: left to the follower")

    async def toggle(self) -> None:
        """The cursor becomes active (a cursor ledger created, `switchToNewLedger`), or is
        closed again (`asyncClose`: the live mark-delete into the znode, then its ledger
        deleted by the broker, which can fail: a cursor-ledger leak)."""
        info = self._cursor()
        if info is None or self.current is None:
            return
        if info.cursorsLedgerId < 0:
            ledger = self.world.cluster.new_ledger(
                cursor_meta(self.t.ml, COMPACTION_CURSOR), closed=False
            )
            # The live value leaves the znode with this write: set it first.
            self.refs.live[self.path] = frozenset({live_copy(self.current)})
            active = ManagedCursorInfo(
                cursorsLedgerId=ledger, markDeleteLedgerId=1, markDeleteEntryId=9
            )
            active.cursorProperties.extend(info.cursorProperties)
            if self.keeps_properties:
                active.properties.extend(info.properties)
            self.refs.write(self.path, active)
            self._log(f"__compaction cursor active, cursor ledger [{ledger}]")
            return
        old_cursor_ledger = info.cursorsLedgerId
        self._write_closed(self.current, info)
        self.refs.live.pop(self.path, None)
        self._log(f"__compaction cursor closed, CompactedTopicLedger={self.current}")
        await self.world.unmodified.deletes_ledger(self.t, old_cursor_ledger)
