"""Tombstone as a registered PIP-454 migration participant, as Pulsar's brokers and bookies are.

Pulsar's `DualMetadataStore` registers an ephemeral sequential znode
`MigrationState.PARTICIPANTS_PATH + "/id-"` (`registerAsParticipant`) and, once it sees
PREPARATION, refuses new writes, waits up to 60 s for its writes in flight and deletes that
znode (`handleMigrationStart`); `MigrationCoordinator.waitForPreparation` waits for the
participants' znodes to be gone before COPYING. So a participant's writes have all landed
before the copy starts, with no window between the coordinator's PREPARATION and the
participant's notification of it.

`Participant` does the same for the writes of one or more `MigrationGuardedStore`s:

- It registers when the record says no migration, NOT_STARTED or FAILED: at start, again after
  a FAILED migration (its znode was deleted in PREPARATION), and again whenever its session
  was lost (an ephemeral znode goes with its session). Never during a migration: the
  coordinator is then past the participants, or waiting for those it saw, and a new znode
  would only hold it up, since no write of ours passes from PREPARATION on anyway.
- The guard counts each write in flight (`writing`). In PREPARATION and COPYING the guard
  refuses new writes; the participant waits for those in flight, then deletes its znode.
- Which znodes are ours is read from the store, not remembered: the children of
  `PARTICIPANTS_PATH` whose `ephemeral_owner` is our session. So a create that got no answer
  (it may have made a znode) or a reconnection on the same session leaves nothing behind that
  would hold the coordinator up.

A write still in flight after `drain_warning` (Pulsar's 60 s) is logged as an error and waited
for still: the znode is our statement that no write of ours can land any more, and it is not
deleted while one may. A request is bounded by the store's request timeout, and a write of a
session that expired is never applied, so the wait ends (the znode then goes with the
session). Pulsar's own participant in that case keeps its znode for good; the coordinator
gives up on it after 60 s in the revision that bounds the wait.

A write that timed out on our side counts as ended, though ZooKeeper may still apply it if
it received it. When it was sent on the session that registered, the delete of the znode is
a later request of the same session, and ZooKeeper applies a session's requests in order: the
write, if applied at all, lands before the delete, so before the copy. A write on another
session (BookKeeper's metadata in a chroot of its own) has no such order: there the wait is
the only protection, and a write timed out on our side is not covered.

A failure to register does not stop writes: the cost of not being registered is the gap of a
Tombstone that never registers (a write can land after the copy of its key, one that the
migration-window page says how to recover from: a lost unlink keeps the ledger referenced on
Oxia, a lost ledger delete leaves an orphan the reconciler finds), while refusing writes until
registered would turn a refused create (an ACL on `/pulsar/migration-coordinator`, say) into
a pause with no end. It is logged at every failed attempt and tried again.

The participants' parent is never created here: it is Pulsar's. A broker or bookie of a
release that takes part in migrations creates it when it registers; where it is absent, no
participant of Pulsar's exists and no migration can start, so there is nothing to wait for,
and the registration is tried again at growing intervals up to `MAX_RETRY_DELAY` (quietly:
the normal state of a
cluster whose Pulsar predates PIP-454). Creating it would give it Tombstone's ACL on a secured
ZooKeeper (its znodes are writable only by Tombstone), and then no broker could register under
it: a broker whose registration fails does not start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any

import structlog

from services.metadata.errors import MetadataError, NoNode
from services.metadata.migration.state import (
    PARTICIPANTS_PATH,
    MigrationFollower,
    MigrationPhase,
    MigrationState,
    Reading,
)
from services.metadata.store import MetadataStore, Stat

_log = structlog.get_logger(__name__)

PARTICIPANT_PREFIX = f"{PARTICIPANTS_PATH}/id-"
"""What `DualMetadataStore.registerAsParticipant` creates (ephemeral sequential, empty)."""

DRAIN_WARNING = 60.0
"""Seconds `DualMetadataStore.handleMigrationStart` waits for its writes in flight."""

MAX_RETRY_DELAY = 30.0


class ParticipantsAbsent(MetadataError):
    """`PARTICIPANTS_PATH` does not exist: no Pulsar participant has registered (module doc)."""


"""Seconds between attempts once they keep failing."""

_REGISTER = frozenset({MigrationPhase.NOT_STARTED, MigrationPhase.FAILED})
_LEAVE = frozenset({MigrationPhase.PREPARATION, MigrationPhase.COPYING})


def _phase(reading: Reading) -> MigrationPhase | None:
    return reading.phase if isinstance(reading, MigrationState) else None


class Participant:
    """Registers in `store` (the store of the migration record `follower` follows) and leaves
    when a migration starts, once the writes counted by `writing` have ended (module doc)."""

    def __init__(
        self,
        store: MetadataStore,
        follower: MigrationFollower,
        *,
        retry_delay: float = 1.0,
        drain_warning: float = DRAIN_WARNING,
    ) -> None:
        self._store = store
        self.follower = follower
        self._retry_delay = retry_delay
        self._drain_warning = drain_warning
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self.registered: str | None = None
        """Our participant znode, as last seen (None: not registered, or not known to be)."""

    @property
    def in_flight(self) -> int:
        """Writes counted by `writing` that have not ended."""
        return self._in_flight

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Count one write in flight for as long as the block runs (the guard enters it in the
        same step as its phase check, so no write slips between the two)."""
        self._in_flight += 1
        self._drained.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()

    async def settle(self) -> None:
        """Do once what the current reading asks (register, leave or nothing); a failure is
        logged, never raised."""
        try:
            await self._act(self.follower.reading)
        except ParticipantsAbsent:
            _log.info("metadata_migration_participants_absent", path=PARTICIPANTS_PATH)
        except MetadataError as e:
            _log.warning("metadata_migration_participant_failed", problem=str(e))

    async def run(self) -> None:
        """Background loop: act on every change of the reading and after every connection
        loss, until cancelled. A failure is logged and the step tried again, at growing
        intervals (a refusal that lasts, an ACL say, is logged every `MAX_RETRY_DELAY`
        seconds, not every second)."""
        delay = self._retry_delay
        while True:
            # Nothing here works without a session; and while disconnected the loss future
            # below would be done at once.
            await self._store.wait_connected()
            reading = self.follower.reading
            lost = self._store.connection_lost()
            try:
                await self._act(reading)
            except ParticipantsAbsent:
                # The normal state before any PIP-454 Pulsar runs here: looked at again, quietly,
                # at the same growing intervals.
                pass
            except MetadataError as e:
                _log.warning(
                    "metadata_migration_participant_failed", problem=str(e), retry_in_s=delay
                )
            except Exception:
                # A bug here must not end participation for the life of the service.
                _log.exception("metadata_migration_participant_error", retry_in_s=delay)
            else:
                delay = self._retry_delay
                await self._next_change(reading, lost)
                continue
            lost.cancel()
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY_DELAY)

    async def _next_change(self, reading: Reading, lost: asyncio.Future[None]) -> None:
        """Return when the reading differs from `reading` or the connection was lost."""
        changed = asyncio.ensure_future(self.follower.wait_for(lambda now: now != reading))
        either: set[asyncio.Future[Any]] = {changed, lost}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            lost.cancel()

    async def _act(self, reading: Reading) -> None:
        phase = _phase(reading)
        if phase in _REGISTER:
            await self._register()
        elif phase in _LEAVE:
            await self._leave(reading)
        # Unknown: nothing can be decided; COMPLETED: this store is a stale copy.

    async def _ours(self) -> list[tuple[str, Stat]]:
        """Our session's participant znodes, oldest first."""
        session = self._store.session_id
        if session is None:
            raise MetadataError(PARTICIPANTS_PATH, "no session: cannot tell our participant")
        try:
            names = await self._store.get_children(PARTICIPANTS_PATH)
        except NoNode:
            return []
        found = []
        for name in sorted(names):
            path = f"{PARTICIPANTS_PATH}/{name}"
            stat = await self._store.exists(path)
            if stat is not None and stat.ephemeral_owner == session:
                found.append((path, stat))
        return found

    async def _register(self) -> None:
        ours = await self._ours()
        if ours:
            self.registered = ours[0][0]
            for path, stat in ours[1:]:  # from a create whose answer was lost
                with contextlib.suppress(NoNode):
                    await self._store.delete(path, version=stat.version)
            return
        self.registered = None
        try:
            path, _stat = await self._store.create_sequential(
                PARTICIPANT_PREFIX, b"", ephemeral=True
            )
        except NoNode as e:
            raise ParticipantsAbsent(
                PARTICIPANTS_PATH, "no Pulsar participant registered here yet"
            ) from e
        self.registered = path
        _log.info("metadata_migration_participant_registered", path=path)

    async def _leave(self, reading: Reading) -> None:
        """Wait for the writes in flight, then delete our znodes (there may be none)."""
        started = time.monotonic()
        if not await self._drain(reading):
            return  # the migration moved on (FAILED, say): act on the new reading
        ours = await self._ours()
        for path, stat in ours:
            with contextlib.suppress(NoNode):
                await self._store.delete(path, version=stat.version)
        self.registered = None
        if ours:
            _log.warning(
                "metadata_migration_participant_left",
                paths=[path for path, _stat in ours],
                phase=_phase(reading),
                waited_s=round(time.monotonic() - started, 3),
            )

    async def _drain(self, reading: Reading) -> bool:
        """Wait until no write is in flight (True), or until the reading changed (False).
        Past `drain_warning` the writes still in flight are logged once, and waited for."""
        if self._in_flight:
            _log.warning("metadata_migration_writes_in_flight", writes=self._in_flight)
        warned = False
        while self._in_flight:
            changed = asyncio.ensure_future(self.follower.wait_for(lambda now: now != reading))
            drained = asyncio.ensure_future(self._drained.wait())
            try:
                done, _pending = await asyncio.wait(
                    {changed, drained},
                    timeout=None if warned else self._drain_warning,
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                changed.cancel()
                drained.cancel()
            if not self._in_flight:
                break
            if changed in done:
                return False
            if not done:
                warned = True
                _log.error(
                    "metadata_migration_writes_still_in_flight",
                    writes=self._in_flight,
                    waited_s=self._drain_warning,
                    consequence="participant znode kept until they end",
                )
        return True
