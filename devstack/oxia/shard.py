"""One Oxia shard: the write path (puts, deletes, delete ranges) and the reads.

As in Oxia (`oxiad/dataserver/database/db.go`), every write is one entry of the shard's log
and takes the next offset: the offset of the notification batch it produces and the id of a
session it creates. Version ids come from a second shard-wide counter that each put advances
(the first put gets 0), so a request with several puts gives each its own version id, and
deletes take none. Creating a session puts Oxia's session record, which takes a version id
too. Each method runs without awaiting, so on the event loop the shard is linearizable.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from . import keys, sequences
from .notifications import Batch, Change, NotificationLog
from .sessions import Session, Sessions
from .storage import Record, SecondaryIndex, SortedRecords

#: `expected_version_id` meaning "the record must not exist".
RECORD_MUST_NOT_EXIST = -1


class InvalidRequest(ValueError):
    """A request Oxia refuses as a whole (answered INVALID_ARGUMENT)."""


@dataclass
class Put:
    key: str
    value: bytes
    expected_version_id: int | None = None
    session_id: int | None = None
    client_identity: str | None = None
    partition_key: str | None = None
    sequence_key_delta: list[int] = field(default_factory=list)
    secondary_indexes: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class PutResult:
    status: str
    record: Record | None = None
    key: str | None = None


@dataclass
class _Entry:
    """The log entry being applied: its offset, time and the changes it notifies."""

    offset: int
    now_ms: int
    changes: dict[str, Change] = field(default_factory=dict)


class Shard:
    def __init__(self, shard_id: int, first_version_id: int = 0) -> None:
        self.shard_id = shard_id
        self.records = SortedRecords()
        self.indexes: dict[str, SecondaryIndex] = {}
        self.sessions = Sessions(self._expire)
        self.notifications = NotificationLog()
        #: Offset of the last committed entry; -1 before the first.
        self.commit_offset = -1
        #: The last version id given to a put; `first_version_id - 1` before the first (a
        #: real shard starts at 0; a high start stands for a server that took many writes).
        self.last_version_id = first_version_id - 1
        self._sequence_watchers: dict[str, set[asyncio.Queue[str]]] = {}

    # -- the log ---------------------------------------------------------------

    def _begin(self) -> _Entry:
        return _Entry(self.commit_offset + 1, int(time.time() * 1000))

    def _commit(self, entry: _Entry) -> None:
        self.commit_offset = entry.offset
        if entry.changes:
            self.notifications.append(Batch(entry.offset, entry.now_ms, entry.changes))

    # -- writes ----------------------------------------------------------------

    def write(
        self, puts: list[Put], deletes: list[tuple[str, int | None]], ranges: list[tuple[str, str]]
    ) -> tuple[list[PutResult], list[str], list[str]]:
        """Apply one batch: puts, then deletes, then delete ranges, each in order."""
        for put in puts:
            self._validate_put(put)
        sequential = self._sequential_keys(puts)
        entry = self._begin()
        put_results = [self._put(entry, put, sequential.get(i)) for i, put in enumerate(puts)]
        delete_results = [self._delete(entry, key, expected) for key, expected in deletes]
        for start, end in ranges:
            self._delete_range(entry, start, end)
        self._commit(entry)
        return put_results, delete_results, ["OK"] * len(ranges)

    @staticmethod
    def _validate_put(put: Put) -> None:
        if put.key.startswith(keys.INTERNAL_PREFIX):
            raise InvalidRequest(f"key {put.key!r} is in the reserved {keys.INTERNAL_PREFIX}")
        if put.sequence_key_delta and not put.partition_key:
            # Oxia: all of a sequence must be on one shard.
            raise InvalidRequest("sequence_key_delta needs a partition_key")

    def _sequential_keys(self, puts: list[Put]) -> dict[int, str]:
        """The keys of the request's sequential puts, by position, worked out before anything
        is applied so that a refused one leaves the shard untouched. (A plain put earlier in
        the same request is not seen by the look-up; Oxia's would see it.)"""
        found: dict[int, str] = {}
        last: dict[str, list[str]] = {}
        for i, put in enumerate(puts):
            if not put.sequence_key_delta or put.expected_version_id is not None:
                continue
            if put.key not in last:
                last[put.key] = sequences.last_parts(self.records, put.key)
            try:
                found[i], last[put.key] = sequences.next_key(
                    last[put.key], put.key, put.sequence_key_delta
                )
            except sequences.SequenceError as exc:
                raise InvalidRequest(str(exc)) from None
        return found

    def _put(self, entry: _Entry, put: Put, sequential: str | None) -> PutResult:
        if put.sequence_key_delta and put.expected_version_id is not None:
            # Oxia answers a sequential put with an expected version as a version mismatch.
            return PutResult("UNEXPECTED_VERSION_ID")
        key = sequential or put.key
        existing = self.records.get(key)
        if not sequential and not _version_matches(existing, put.expected_version_id):
            return PutResult("UNEXPECTED_VERSION_ID")
        session: Session | None = None
        if put.session_id is not None:
            session = self.sessions.live(put.session_id)
            if session is None:
                return PutResult("SESSION_DOES_NOT_EXIST")
        record = Record(
            value=put.value,
            version_id=self._next_version_id(),
            modifications_count=existing.modifications_count + 1 if existing else 0,
            created_ms=existing.created_ms if existing else entry.now_ms,
            modified_ms=entry.now_ms,
            session_id=put.session_id,
            client_identity=put.client_identity,
            secondary_indexes=list(put.secondary_indexes),
        )
        if existing:
            self._unlink(key, existing)
        self._link(key, record, session)
        kind = "KEY_MODIFIED" if existing else "KEY_CREATED"
        entry.changes[key] = Change(kind, version_id=record.version_id)
        if sequential:
            self._announce_sequence(put.key, key)
        return PutResult("OK", record, sequential)

    def _delete(self, entry: _Entry, key: str, expected: int | None) -> str:
        existing = self.records.get(key)
        # The version is checked first: a missing key with an expected version other than
        # "must not exist" is UNEXPECTED_VERSION_ID, not KEY_NOT_FOUND (as in Oxia).
        if not _version_matches(existing, expected):
            return "UNEXPECTED_VERSION_ID"
        if existing is None:
            return "KEY_NOT_FOUND"
        self._remove(entry, key, existing)
        return "OK"

    def _delete_range(self, entry: _Entry, start: str, end: str) -> None:
        for key, record in self.records.range(start, end):
            self.records.delete(key)
            self._unlink(key, record)
        # One notification for the range, keyed by its start, even when it removed nothing;
        # earlier changes in the batch to keys inside it stay (Oxia keeps the last change
        # per key, and the range is keyed by its start only).
        entry.changes[start] = Change("KEY_RANGE_DELETED", key_range_last=end)

    def _remove(self, entry: _Entry, key: str, record: Record) -> None:
        self.records.delete(key)
        self._unlink(key, record)
        entry.changes[key] = Change("KEY_DELETED")

    def _link(self, key: str, record: Record, session: Session | None) -> None:
        self.records.put(key, record)
        for name, secondary in record.secondary_indexes:
            self.indexes.setdefault(name, SecondaryIndex()).add(secondary, key)
        if session is not None:
            session.keys.add(key)

    def _unlink(self, key: str, record: Record) -> None:
        for name, secondary in record.secondary_indexes:
            self.indexes[name].remove(secondary, key)
        owner = self.sessions.live(record.session_id)
        if owner is not None:
            owner.keys.discard(key)

    # -- sessions --------------------------------------------------------------

    def _next_version_id(self) -> int:
        self.last_version_id += 1
        return self.last_version_id

    def create_session(self, timeout_ms: int, client_identity: str) -> int:
        """A new session, whose id is its log entry's offset."""
        entry = self._begin()
        self._next_version_id()  # Oxia's session record is a put
        self.sessions.open(entry.offset, timeout_ms, client_identity)
        self._commit(entry)
        return entry.offset

    def keep_alive(self, session_id: int) -> None:
        self.sessions.heartbeat(session_id)

    def close_session(self, session_id: int) -> None:
        """Close the session and delete its ephemeral records, in one log entry."""
        session = self.sessions.remove(session_id)
        entry = self._begin()
        for key in sorted(session.keys, key=keys.encode):
            record = self.records.get(key)
            if record is not None and record.session_id == session_id:
                self._remove(entry, key, record)
        self._commit(entry)

    def _expire(self, session_id: int) -> None:
        # A session closed by its client while the expiry was due is already gone.
        with contextlib.suppress(LookupError):
            self.close_session(session_id)

    def expire_sessions(self) -> None:
        """Expire every live session now, as its timeout would."""
        for session_id in self.sessions.ids():
            self._expire(session_id)

    def close(self) -> None:
        self.sessions.close_all()

    # -- sequential keys -------------------------------------------------------

    def watch_sequence(self, prefix: str) -> asyncio.Queue[str]:
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._sequence_watchers.setdefault(prefix, set()).add(queue)
        last = sequences.last_key(self.records, prefix)
        if last is not None:
            queue.put_nowait(last)
        return queue

    def unwatch_sequence(self, prefix: str, queue: asyncio.Queue[str]) -> None:
        self._sequence_watchers.get(prefix, set()).discard(queue)

    def _announce_sequence(self, prefix: str, key: str) -> None:
        for queue in self._sequence_watchers.get(prefix, ()):
            queue.put_nowait(key)


def _version_matches(existing: Record | None, expected: int | None) -> bool:
    if expected is None:
        return True
    if expected == RECORD_MUST_NOT_EXIST:
        return existing is None
    return existing is not None and existing.version_id == expected
