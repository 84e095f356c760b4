"""One active follower among several: an ephemeral leader znode.

    /tombstone/follower/leader   ephemeral, data: the holder's marker id

The follower whose session created the znode is active; the others watch it and try again
when it goes. Fencing: the active follower stops publishing as soon as its connection is
lost (it cannot know whether its session, and with it the znode, survives), and resumes
only after reconnecting and finding the znode still owned by its session. A follower whose
session expired has lost the znode; another may already be active. So two followers publish
at the same time at most for the few seconds a publish already under way takes to finish,
and their PDLIs are the same intents anyway (deletion is idempotent).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from services.metadata import MetadataStore, NodeExists, NoNode, WatchEvent

LEADER_PATH = "/tombstone/follower/leader"


class Leadership:
    def __init__(self, store: MetadataStore, identity: str, path: str = LEADER_PATH) -> None:
        self._store = store
        self._identity = identity.encode()
        self._path = path

    async def acquire(self, stopping: asyncio.Event) -> bool:
        """Return True once this session holds the leader znode; False if `stopping` is set
        first. Store failures propagate (the caller waits and tries again)."""
        store = self._store
        while not stopping.is_set():
            await store.wait_connected()
            with contextlib.suppress(NodeExists):
                await store.create(self._path, self._identity, make_parents=True, ephemeral=True)
                return True
            stat, fired = await store.watch(self._path)
            if stat is not None and stat.ephemeral_owner == store.session_id:
                fired.cancel()
                return True  # ours from before a reconnect of the same session
            if stat is not None:
                await _first(fired, stopping)
            fired.cancel()
        return False

    async def holds(self) -> bool:
        """Whether this session holds the leader znode now (a successful read says so)."""
        stat = await self._store.exists(self._path)
        return stat is not None and stat.ephemeral_owner == self._store.session_id

    async def release(self) -> None:
        """Give the znode up (on a clean stop), so a standby takes over at once."""
        if not await self.holds():
            return
        with contextlib.suppress(NoNode):
            stat = await self._store.exists(self._path)
            if stat is not None:
                await self._store.delete(self._path, version=stat.version)


async def _first(fired: asyncio.Future[WatchEvent], stopping: asyncio.Event) -> None:
    stop = asyncio.ensure_future(stopping.wait())
    try:
        waiting: list[asyncio.Future[Any]] = [fired, stop]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
