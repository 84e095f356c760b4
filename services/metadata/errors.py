"""Typed errors of the metadata layer. Every one names the znode path it is about.

`StoreUnavailable` means *unknown*: the store did not answer. It is never a subclass of
`NotFound`, so no caller can mistake an outage for absence.
"""

from __future__ import annotations

from services.core.adaptive import Signal
from services.core.errors import Conflict, CorruptData, NotFound, TombstoneError, Unavailable
from services.core.zk_security import ZooKeeperRefused


class MetadataError(TombstoneError):
    """Root of the metadata layer's errors; `path` is the znode concerned."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class CorruptMetadata(MetadataError, CorruptData):
    """The znode exists but its content cannot be decoded (`problem` says why)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(path, f"corrupt metadata: {problem}")
        self.problem = problem


class NoNode(MetadataError, NotFound):
    """A successful read showed that the znode does not exist."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "no such znode")


class NodeExists(MetadataError, Conflict):
    """A create found the znode already there."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "znode already exists")


class NotEmpty(MetadataError, Conflict):
    """A delete found that the znode still has children."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "znode has children")


class VersionConflict(MetadataError, Conflict):
    """A compare-and-set lost: the znode's version is not `expected_version` any more."""

    def __init__(self, path: str, expected_version: int) -> None:
        super().__init__(path, f"version is not {expected_version} (compare-and-set lost)")
        self.expected_version = expected_version


class StoreUnavailable(MetadataError, Unavailable):
    """The store did not answer (timeout, connection loss, session expiry): the state is unknown.

    For a write, the write may or may not have been applied.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, f"metadata store unavailable: {reason}")
        self.reason = reason


class Unsupported(MetadataError):
    """The server refused the request as one it does not implement (ZooKeeper's
    UNIMPLEMENTED, from a server older than the request): nothing was applied."""

    def __init__(self, path: str, request: str) -> None:
        super().__init__(path, f"the server does not implement {request}")
        self.request = request


class AuthenticationFailed(MetadataError, ZooKeeperRefused):
    """ZooKeeper refused Tombstone's authentication (AUTH_FAILED) and closed the session:
    final, never retried and never read as "absent"."""

    def __init__(self, path: str) -> None:
        super().__init__(
            path,
            "ZooKeeper refused the authentication (AUTH_FAILED): check "
            "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER and its password",
        )


class NotAuthorized(MetadataError, ZooKeeperRefused):
    """ZooKeeper refused the request for lack of permission (NOAUTH): Tombstone's identity
    is not in the znode's ACL. Nothing was applied."""

    def __init__(self, path: str) -> None:
        super().__init__(
            path,
            "ZooKeeper refused access (NOAUTH): the znode's ACL does not grant "
            "TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER (or no user is set)",
        )


def missing_required_fields(message: object) -> str:
    """The names of a protobuf message's unset required fields, comma-separated."""
    finder = getattr(message, "FindInitializationErrors", None)
    return ", ".join(finder()) if finder is not None else "?"


def zookeeper_signal(error: BaseException) -> Signal:
    """What a failed metadata-store request says about the store, for an adaptive concurrency
    limit: no answer (timeout, connection or session lost) cuts it; a refusal (NoNode, a
    version conflict, NotEmpty) is an answer, whose latency counts like any other."""
    if isinstance(error, StoreUnavailable):
        return Signal.UNANSWERED
    if isinstance(error, MetadataError):
        return Signal.ANSWERED
    return Signal.IGNORED
