"""The one error root of the suite, each subclass carrying the gRPC status it maps to.

Errors are mapped to a status once, at the gRPC boundary. "Unknown" has its own type
(`Unavailable`): a timeout or a lost connection must never be read as "absent".
"""

from __future__ import annotations

import grpc


class TombstoneError(Exception):
    """Root of every error the suite raises on purpose."""

    grpc_code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    @property
    def cause(self) -> BaseException | None:
        """The lower-level exception this one was raised from, if any."""
        return self.__cause__


class InvalidArgument(TombstoneError, ValueError):
    """A request field is missing or malformed. The message names the field."""

    grpc_code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class NotFound(TombstoneError):
    """A successful read showed that the thing does not exist."""

    grpc_code = grpc.StatusCode.NOT_FOUND


class Conflict(TombstoneError):
    """A compare-and-set lost: someone else wrote first."""

    grpc_code = grpc.StatusCode.ABORTED


class Unavailable(TombstoneError):
    """A dependency did not answer (timeout, lost connection, expired session): unknown."""

    grpc_code = grpc.StatusCode.UNAVAILABLE


class Unauthenticated(TombstoneError):
    grpc_code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(TombstoneError):
    grpc_code = grpc.StatusCode.PERMISSION_DENIED


class FailedPrecondition(TombstoneError):
    """The request is valid but the system is not in a state to serve it."""

    grpc_code = grpc.StatusCode.FAILED_PRECONDITION


class StartupRefused(FailedPrecondition):
    """What the service found at start is not what it needs (the cluster's metadata, a topic's
    partitions); the message is one line, and the process exits with code 2."""


class CorruptData(TombstoneError):
    """Stored data could not be decoded. Never treated as absence."""

    grpc_code = grpc.StatusCode.DATA_LOSS


class ConfigError(TombstoneError, ValueError):
    """A setting read at startup is malformed. The message names the variable."""

    grpc_code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable
        self.problem = problem


class ExposedWithoutAuth(ConfigError):
    """The gRPC server would listen on an address other machines can reach with nothing
    authenticating callers. Each setting is well-formed: the combination is refused, so a
    service started this way ends like one refused by the cluster (exit code 2), not like a
    typo (exit code 1)."""
