"""Client sessions of one shard: heartbeats, expiry and the ephemeral keys they own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

#: Bounds Oxia puts on a session's timeout (`common/constant/constants.go`).
MIN_TIMEOUT_MS = 2_000
MAX_TIMEOUT_MS = 5 * 60_000


class SessionNotFound(LookupError):
    """No live session with this id on this shard."""


@dataclass
class Session:
    session_id: int
    timeout_ms: int
    client_identity: str
    #: Ephemeral keys written under this session and not since overwritten or deleted.
    keys: set[str] = field(default_factory=set)
    expiry: asyncio.TimerHandle | None = None


class Sessions:
    """Live sessions by id; a session not heard from within its timeout is expired through
    `on_expired`, which removes its ephemeral keys like a close does."""

    def __init__(self, on_expired: Callable[[int], None]) -> None:
        self._live: dict[int, Session] = {}
        self._on_expired = on_expired

    def open(self, session_id: int, timeout_ms: int, client_identity: str) -> Session:
        session = Session(session_id, timeout_ms, client_identity)
        self._live[session_id] = session
        self._arm(session)
        return session

    def get(self, session_id: int) -> Session:
        session = self._live.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    def heartbeat(self, session_id: int) -> None:
        self._arm(self.get(session_id))

    def remove(self, session_id: int) -> Session:
        session = self._live.pop(session_id, None)
        if session is None:
            raise SessionNotFound(session_id)
        if session.expiry is not None:
            session.expiry.cancel()
        return session

    def ids(self) -> list[int]:
        """The ids of the live sessions."""
        return list(self._live)

    def live(self, session_id: int | None) -> Session | None:
        """The live session with this id, if any (None for a record without a session)."""
        return self._live.get(session_id) if session_id is not None else None

    def close_all(self) -> None:
        for session in self._live.values():
            if session.expiry is not None:
                session.expiry.cancel()
        self._live.clear()

    def _arm(self, session: Session) -> None:
        if session.expiry is not None:
            session.expiry.cancel()
        loop = asyncio.get_running_loop()
        session.expiry = loop.call_later(
            session.timeout_ms / 1000, self._on_expired, session.session_id
        )
