"""PIP-454 (Pulsar 5.0's live metadata migration from ZooKeeper to Oxia), as Tombstone sees it.

In: a `MetadataStore` (the source store, where Pulsar keeps the migration record). Out: the
same store wrapped in `MigrationGuardedStore`, which refuses writes while the data is being
copied and everything once the data lives in Oxia. `state` reads and follows the record;
`guard` decides what each phase allows, `participant` registers Tombstone as a
participant so that the coordinator waits for its writes in flight.
"""

from services.metadata.migration.guard import (
    STORE_URL_SETTINGS,
    MigrationGuardedStore,
    guarded_write_refusal,
    read_refusal_reason,
    write_refusal_reason,
)
from services.metadata.migration.participant import PARTICIPANT_PREFIX, Participant
from services.metadata.migration.state import (
    MIGRATION_FLAG_PATH,
    NO_MIGRATION,
    PARTICIPANTS_PATH,
    MigrationFollower,
    MigrationPhase,
    MigrationState,
    Reading,
    Unknown,
    decode_state,
)

__all__ = [
    "MIGRATION_FLAG_PATH",
    "NO_MIGRATION",
    "PARTICIPANTS_PATH",
    "PARTICIPANT_PREFIX",
    "STORE_URL_SETTINGS",
    "MigrationFollower",
    "MigrationGuardedStore",
    "MigrationPhase",
    "MigrationState",
    "Participant",
    "Reading",
    "Unknown",
    "decode_state",
    "guarded_write_refusal",
    "read_refusal_reason",
    "write_refusal_reason",
]
