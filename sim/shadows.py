"""Shadow topics (PIP-180, Pulsar 3.0+) in the simulated cluster.

A shadow topic's ML znode holds a copy of its source's ledger list and names the source in
its `PULSAR.SHADOW_SOURCE` property (`ShadowManagedLedgerImpl`); the shadow's broker copies
the source's list again as it changes, so the shadow drops a ledger some time after the
source did. The ledgers stay the source's: its unmodified broker's trims delete them whatever
a shadow lists, and deleting the shadow topic deletes the shadow's cursors (each with its own
cursor ledger) and its ML znode, never the source's ledgers. A shadow reads the ledgers its
copy lists, though, so no deleter may delete one while a shadow lists it (S1 counts the copy
at each delete by a deleter); L1 and the end of the run count only the shadow's cursor
ledgers (Pulsar's own deletes ignore shadows).

Shadows are created at the start, at a random moment, and right after a trim of their
source from the list its broker read before the trim (`create_later`): a shadow the verifier's
last scan did not see, listing a ledger the source just unlinked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

from services.metadata.pulsar_formats import (
    SHADOW_SOURCE,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    decode_managed_ledger_info,
)
from services.metadata.pulsar_names import cursor_path, managed_ledger_path
from sim.pulsar import cursor_meta
from sim.state import TopicState
from sim.view import WorldView

SHADOW_SHARE = 0.3
"""Of the topics, the share that has a shadow topic."""
DELETE_SHARE = 0.5
"""Of the shadows, the share deleted during the run (by its broker, unmodified)."""
LATE_SHARE = 0.3
"""Of the trims, the share right after which a shadow of the trimmed topic is created from
the list its broker read before the trim; and of the topics, the share that get a shadow at
a random moment of the run."""
READ_TO_WRITE = 2.0
"""The longest time between a shadow's broker reading its source's list and writing the
shadow's ML znode (seconds)."""


class Shadow:
    def __init__(self, world: WorldView, source: TopicState, state: TopicState) -> None:
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
            await world.unmodified.unsubscribe(self.state, recreate=False)
            self.deleted = True
            stat = world.zk.stat(self.path)
            if stat is not None:
                world.zk.delete(self.path, version=stat.version, by="pulsar")


class ShadowWorld(WorldView, Protocol):
    """The world as the shadows' creation sees it: it also keeps the shadows."""

    shadows: list[Shadow]


def create_shadow(
    world: ShadowWorld,
    source: TopicState,
    *,
    name: str = "",
    listed: Sequence[ManagedLedgerInfo.LedgerInfo] | None = None,
) -> Shadow:
    """A shadow of `source` with one subscription of its own: its ML znode written at once
    with `PULSAR.SHADOW_SOURCE` and `listed` (the source's list as its broker read it; the
    list as it is now when None)."""
    tenant, namespace, _, local = source.ml.split("/")
    state = TopicState(name or f"{source.ml}-shadow", "sub", source.broker, unmodified=True)
    shadow = Shadow(world, source, state)
    world.shadow_lists[shadow.path] = frozenset()
    cursor = cursor_path(state.ml, state.cursor)
    world.owners[cursor] = frozenset()
    world.unmodified_paths.add(cursor)
    info = ManagedLedgerInfo()
    info.properties.add(key=SHADOW_SOURCE, value=f"persistent://{tenant}/{namespace}/{local}")
    if listed is None:
        now = world.cluster.ml_info(source.ml)
        listed = list(now[0].ledgerInfo) if now is not None else []
    info.ledgerInfo.extend(listed)
    world.zk.create(shadow.path, world.cluster.ml_bytes(info))
    world.zk.create(cursor, world.cluster.cursor_bytes(ManagedCursorInfo(cursorsLedgerId=-1)))
    ledger = world.cluster.new_ledger(cursor_meta(state.ml, state.cursor), closed=False)
    world.cluster.write_cursor(state.ml, state.cursor, ledger)
    world.shadows.append(shadow)
    return shadow


async def create_later(
    world: ShadowWorld, source: TopicState, listed: Sequence[ManagedLedgerInfo.LedgerInfo]
) -> None:
    """`createShadowTopic` during the run: the shadow's broker read `listed` from its source,
    and writes the shadow up to `READ_TO_WRITE` seconds later, its source's trims meanwhile
    still in the copy (the race the verifier's fresh shadow view closes); then the shadow
    follows its source, and half the time is deleted later."""
    rng = world.shadow_rng
    await asyncio.sleep(rng.uniform(0.0, READ_TO_WRITE))
    world.late_shadow_count += 1
    name = f"{source.ml}-shadow{world.late_shadow_count}"
    world.sched.log(f"broker-{source.broker} creates shadow topic {name} of {source.ml}")
    shadow = create_shadow(world, source, name=name, listed=listed)
    world.shadow_followers.append(asyncio.create_task(shadow.follow_source()))
    if rng.random() < DELETE_SHARE:
        await shadow.delete_later()
