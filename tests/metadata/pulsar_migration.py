"""The migration record as Apache Pulsar 5.0's PIP-454 coordinator writes it."""

from __future__ import annotations

import json

from services.metadata import MetadataStore, NoNode
from services.metadata.migration import MIGRATION_FLAG_PATH, MigrationPhase

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
    COPYING, then COMPLETED, or FAILED."""

    def __init__(self, store: MetadataStore, target_url: str = TARGET_URL) -> None:
        self._store = store
        self.target_url = target_url

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
