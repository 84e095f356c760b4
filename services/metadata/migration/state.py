"""PIP-454's migration state, as Pulsar keeps it in the source metadata store.

Facts from Apache Pulsar 5.0 (pulsar-common `org.apache.pulsar.common.migration`,
pulsar-metadata `MigrationCoordinator` and `DualMetadataStore`):

- The state is one record at `MigrationState.MIGRATION_FLAG_PATH`,
  `/pulsar/migration-coordinator/migration`, in the *source* store only. It is Jackson's JSON
  of `MigrationState` (Lombok `@Data`): `{"phase": "<MigrationPhase>", "targetUrl": "oxia://..."}`.
  `MigrationCoordinator.setInitialMigrationPhase` creates it (PREPARATION) and
  `MigrationCoordinator.updatePhase` overwrites it (COPYING, COMPLETED, FAILED).
- The phases are `MigrationPhase`: NOT_STARTED (also what an absent record means:
  `MigrationState.NOT_STARTED`), PREPARATION, COPYING, COMPLETED, FAILED.
- Brokers and bookies run on `DualMetadataStore`, which reads the record at start
  (`readCurrentState`, after a `sync`) and follows it with a listener on that path
  (`watchForMigrationEvents`). Its `put`, `delete` and `deleteRecursive` fail with
  `IllegalStateException("Write operations not allowed during migrations")` in PREPARATION
  and COPYING; reads go to the source until COMPLETED and to the Oxia target from then on;
  FAILED routes everything back to the source ("rolled back to the old metadata store").
- Participants register an ephemeral sequential child of `MigrationState.PARTICIPANTS_PATH`
  and delete it once their pending writes are done; `MigrationCoordinator.waitForPreparation`
  waits for that before COPYING.

This module only decodes the record and follows it; `guard.py` decides what that means for
Tombstone's reads and writes, and `participant.py` registers Tombstone as a participant.
"""

from __future__ import annotations

import asyncio
import enum
import json
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from services.metadata.errors import CorruptMetadata, MetadataError, NoNode
from services.metadata.store import MetadataStore, WatchEvent

_log = structlog.get_logger(__name__)

COORDINATOR_PATH = "/pulsar/migration-coordinator"
MIGRATION_FLAG_PATH = f"{COORDINATOR_PATH}/migration"
"""`MigrationState.MIGRATION_FLAG_PATH`: where the coordinator writes the phase."""
PARTICIPANTS_PATH = f"{COORDINATOR_PATH}/participants"
"""`MigrationState.PARTICIPANTS_PATH`: where participants register (`participant.py`)."""


class MigrationPhase(enum.StrEnum):
    """Pulsar's `MigrationPhase`, spelled as its JSON spells it."""

    NOT_STARTED = "NOT_STARTED"
    PREPARATION = "PREPARATION"
    COPYING = "COPYING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


@dataclass(frozen=True, slots=True)
class MigrationState:
    """One reading of the migration record."""

    phase: MigrationPhase
    target_url: str | None = None


NO_MIGRATION = MigrationState(MigrationPhase.NOT_STARTED)
"""What an absent record means (`MigrationState.NOT_STARTED`)."""


def decode_state(data: bytes, *, path: str = MIGRATION_FLAG_PATH) -> MigrationState:
    """The state in the record's JSON; `CorruptMetadata` when it is not one Pulsar writes
    (a phase this code does not know is not guessed at: it is undecodable)."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptMetadata(path, f"migration state is not JSON: {e}") from None
    if not isinstance(document, dict):
        raise CorruptMetadata(path, "migration state is not a JSON object")
    phase = document.get("phase")
    if not isinstance(phase, str) or phase not in MigrationPhase.__members__:
        raise CorruptMetadata(path, f"unknown migration phase {phase!r}")
    target = document.get("targetUrl")
    if target is not None and not isinstance(target, str):
        raise CorruptMetadata(path, f"targetUrl is not a string: {target!r}")
    return MigrationState(MigrationPhase(phase), target)


@dataclass(frozen=True, slots=True)
class Unknown:
    """The record could not be read or decoded: no phase is known (not even "none")."""

    problem: str


Reading = MigrationState | Unknown
"""What the follower knows now."""


class MigrationFollower:
    """The current reading of the migration record, kept in step by a watch.

    Unknown from the start until a read succeeds, and again from a connection loss until the
    record is read once more: changes may have been missed meanwhile. `listener` is called on
    every change of the reading (for logs and tests)."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        retry_delay: float = 1.0,
        listener: Callable[[Reading], None] | None = None,
    ) -> None:
        self._store = store
        self._retry_delay = retry_delay
        self._listener = listener
        self.reading: Reading = Unknown("migration state not read yet")
        self._changed = asyncio.Event()

    async def refresh(self) -> Reading:
        """Read the record once (no watch) and adopt what it says."""
        try:
            self._adopt(decode_state((await self._store.get(MIGRATION_FLAG_PATH)).data))
        except NoNode:
            self._adopt(NO_MIGRATION)
        except MetadataError as e:  # unavailable, corrupt, or refused
            self._adopt(Unknown(str(e)))
        return self.reading

    async def run(self) -> None:
        """Background loop: follow the record until cancelled; never returns. Once it stops
        (cancelled, or an error it does not expect) the reading is unknown again."""
        try:
            await self._follow()
        finally:
            self._adopt(Unknown("the migration record is not followed any more"))

    async def _follow(self) -> None:
        while True:
            try:
                event = await self._read_and_watch()
            except CorruptMetadata as e:
                # A record we cannot decode is watched too: a fixed one is adopted at once.
                self._adopt(Unknown(str(e)))
                event = await self._wait_change()
            except MetadataError as e:  # unavailable, or refused (authentication, ACL)
                self._adopt(Unknown(str(e)))
                await asyncio.sleep(self._retry_delay)
                continue
            if event is WatchEvent.CONNECTION_LOST:
                self._adopt(Unknown("connection lost: migration state is being read again"))
                await self._store.wait_connected()

    async def wait_for(self, predicate: Callable[[Reading], bool]) -> Reading:
        """Return the reading once `predicate` holds for it."""
        while not predicate(self.reading):
            await self._changed.wait()
        return self.reading

    async def _read_and_watch(self) -> WatchEvent:
        """Adopt the record's state and wait for its next change."""
        try:
            node, fired = await self._store.get_and_watch(MIGRATION_FLAG_PATH)
        except NoNode:
            stat, fired = await self._store.watch(MIGRATION_FLAG_PATH)
            if stat is not None:  # created between the two calls: read it now
                fired.cancel()
                return WatchEvent.CREATED
            self._adopt(NO_MIGRATION)
            return await fired
        try:
            self._adopt(decode_state(node.data))
        except CorruptMetadata:
            fired.cancel()
            raise
        return await fired

    async def _wait_change(self) -> WatchEvent:
        try:
            _stat, fired = await self._store.watch(MIGRATION_FLAG_PATH)
        except MetadataError:
            await asyncio.sleep(self._retry_delay)
            return WatchEvent.CONNECTION_LOST
        return await fired

    def _adopt(self, reading: Reading) -> None:
        if reading == self.reading:
            return
        self.reading = reading
        if isinstance(reading, Unknown):
            _log.warning("metadata_migration_state_unknown", problem=reading.problem)
        else:
            _log.warning(
                "metadata_migration_phase",
                phase=reading.phase.value,
                target_url=reading.target_url,
            )
        if self._listener is not None:
            self._listener(reading)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
