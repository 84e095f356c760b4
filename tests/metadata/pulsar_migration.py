"""The migration record as Apache Pulsar 5.0's PIP-454 coordinator writes it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from services.metadata import MetadataStore, NoNode, Versioned
from services.metadata.migration import MIGRATION_FLAG_PATH, PARTICIPANTS_PATH, MigrationPhase

TARGET_URL = "oxia://oxia.example:6648/default"


def pulsar_state_json(phase: MigrationPhase, target_url: str = TARGET_URL) -> bytes:
    """`MigrationState` serialized by Pulsar's `ObjectMapperFactory.getMapper()` (Jackson over
    Lombok's `@Data` getters: `phase` then `targetUrl`, compact)."""
    return json.dumps(
        {"phase": phase.value, "targetUrl": target_url}, separators=(",", ":")
    ).encode()


class PulsarMigrationCoordinator:
    """What `org.apache.pulsar.metadata.coordination.impl.MigrationCoordinator` writes on the
    source store: `setInitialMigrationPhase` creates `MigrationState.MIGRATION_FLAG_PATH`
    (`/pulsar/migration-coordinator/migration`) with PREPARATION (a create-only `put`,
    expected version -1, parents created as ZooKeeper's `ZKMetadataStore.put` does), and
    `updatePhase` overwrites it through a `MetadataCache<MigrationState>` (any version) with
    COPYING, then COMPLETED, or FAILED. Between PREPARATION and COPYING, `waitForPreparation`
    waits for the participants' znodes to be gone."""

    def __init__(self, store: MetadataStore, target_url: str = TARGET_URL) -> None:
        self._store = store
        self.target_url = target_url
        self.waited_for: set[str] = set()
        """Every participant znode `wait_for_preparation` saw."""

    async def wait_for_preparation(
        self, *, limit: float = 60.0, max_delay: float = 60.0
    ) -> list[str]:
        """`MigrationCoordinator.waitForPreparation`: list the children of
        `MigrationState.PARTICIPANTS_PATH` (none when it is absent, as `ZKMetadataStore`'s
        `getChildren` answers), with a backoff from 100 ms (doubling, at most `max_delay`:
        Pulsar's is 60 s), until there are none or `limit` seconds (Pulsar's 60) passed. The
        participants still there then: Pulsar logs them and goes on to COPYING anyway."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        delay = 0.1
        while True:
            try:
                pending = await self._store.get_children(PARTICIPANTS_PATH)
            except NoNode:
                pending = []
            if not pending:
                return []
            self.waited_for.update(pending)
            if loop.time() >= deadline:
                return pending
            await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
            delay = min(delay * 2, max_delay)

    async def copy(self, paths: Sequence[str]) -> dict[str, Versioned | None]:
        """What `copyPersistentData` would put into Oxia for `paths` (read now)."""
        got = await self._store.get_many(paths)
        copied: dict[str, Versioned | None] = {}
        for path, node in zip(paths, got, strict=True):
            assert not isinstance(node, Exception), node
            copied[path] = node
        return copied

    async def set_initial_migration_phase(self) -> None:
        await self._store.create(
            MIGRATION_FLAG_PATH,
            pulsar_state_json(MigrationPhase.PREPARATION, self.target_url),
            make_parents=True,
        )

    async def update_phase(self, phase: MigrationPhase) -> None:
        await self.write_raw(pulsar_state_json(phase, self.target_url))

    async def write_raw(self, data: bytes) -> None:
        """Overwrite the record with `data` (creating it when absent)."""
        try:
            current = await self._store.get(MIGRATION_FLAG_PATH)
        except NoNode:
            await self._store.create(MIGRATION_FLAG_PATH, data, make_parents=True)
            return
        await self._store.set(MIGRATION_FLAG_PATH, data, version=current.version)
