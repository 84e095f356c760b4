"""Shadow topics (PIP-180, Pulsar 3.0+) in the simulated cluster.

A shadow topic's ML znode holds a copy of its source's ledger list and names the source in
its `PULSAR.SHADOW_SOURCE` property (`ShadowManagedLedgerImpl`); the shadow's broker copies
the source's list again as it changes, so the shadow drops a ledger some time after the
source did. The ledgers stay the source's: its trims delete them whatever a shadow lists, and
deleting the shadow topic deletes the shadow's cursors (each with its own cursor ledger) and
its ML znode, never the source's ledgers. So a shadow's list is not a reference of its own:
the invariants count the shadow's cursor ledgers, not its copy of the list.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    ManagedLedgerInfo,
    decode_managed_ledger_info,
)
from services.metadata.pulsar_names import cursor_path, managed_ledger_path
from sim.pulsar import cursor_meta

if TYPE_CHECKING:
    from sim.world import TopicState, World

SHADOW_SHARE = 0.3
"""Of the topics, the share that has a shadow topic."""
DELETE_SHARE = 0.5
"""Of the shadows, the share deleted during the run (by its broker, unmodified)."""


class Shadow:
    def __init__(self, world: World, source: TopicState, state: TopicState) -> None:
        self.world, self.source, self.state = world, source, state
        self.deleted = False

    @property
    def path(self) -> str:
        return managed_ledger_path(self.state.ml)

    def copy_list(self) -> None:
        """The shadow's broker writes the source's list as it is now (CAS at the version it
        read); nothing to do while either znode is missing."""
        zk = self.world.zk
        source = self.world.cluster.ml_info(self.source.ml)
        node = zk.nodes.get(self.path)
        if source is None or node is None:
            return
        info = decode_managed_ledger_info(node.data, path=self.path)
        if list(info.ledgerInfo) == list(source[0].ledgerInfo):
            return
        del info.ledgerInfo[:]
        info.ledgerInfo.extend(source[0].ledgerInfo)
        zk.set(self.path, self.world.cluster.ml_bytes(info), version=node.version)

    async def follow_source(self) -> None:
        """The shadow's broker keeps its copy of the list, a few seconds behind the source."""
        rng = self.world.sched.rng
        while not self.deleted:
            await asyncio.sleep(rng.uniform(0.5, 5.0))
            async with self.source.lock:
                if not self.deleted:
                    self.copy_list()

    async def delete_later(self) -> None:
        """`ShadowManagedLedgerImpl.asyncDelete` at a drawn moment of the run: the cursor
        znode, then its ledger (the broker's own delete, which may fail), then the ML znode;
        the source's ledgers are left to the source."""
        world = self.world
        await asyncio.sleep(world.sched.rng.uniform(0.0, 30.0))
        async with self.source.lock:
            world.sched.log(f"broker-{self.state.broker} deletes shadow topic {self.state.ml}")
            await world._unmodified_unsubscribe(self.state, recreate=False)
            self.deleted = True
            stat = world.zk.stat(self.path)
            if stat is not None:
                world.zk.delete(self.path, version=stat.version, by="pulsar")


def create_shadow(world: World, source: TopicState) -> Shadow:
    """A shadow of `source` created at the start, with one subscription of its own."""
    from sim.world import TopicState

    tenant, namespace, _, local = source.ml.split("/")
    state = TopicState(f"{source.ml}-shadow", "sub", source.broker, unmodified=True)
    cursor = cursor_path(state.ml, state.cursor)
    world.owners[cursor] = frozenset()
    world.unmodified_paths.add(cursor)
    world.cluster.create_topic(state.ml, state.cursor)
    shadow = Shadow(world, source, state)
    node = world.zk.nodes[shadow.path]
    info = ManagedLedgerInfo()
    info.properties.add(key=SHADOW_SOURCE, value=f"persistent://{tenant}/{namespace}/{local}")
    world.zk.set(shadow.path, world.cluster.ml_bytes(info), version=node.version)
    shadow.copy_list()
    ledger = world.cluster.new_ledger(cursor_meta(state.ml, state.cursor), closed=False)
    world._write_cursor(state, ledger)
    return shadow
