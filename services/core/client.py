"""Service-to-service calls: a channel factory and typed errors for failed calls.

    channel = open_channel(config.verifier)          # an aio.Channel; close it on the stack
    stub = verifier_pb2_grpc.VerifierStub(channel)
    with rpc_errors("verifier"):
        response = await stub.Verify(request)

A call whose outcome is unknown (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL, ...) becomes
`Unavailable`, never a negative answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc
from grpc import aio

from services.core.config import ClientConfig
from services.core.errors import (
    Conflict,
    CorruptData,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    TombstoneError,
    Unauthenticated,
    Unavailable,
)

_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    # Ping an idle connection every 30 s so a dead peer is noticed before the next call
    # (the server allows pings every 20 s, see grpc_server._server_options).
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Reconnect quickly after a restart of the peer.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5_000),
]


def open_channel(config: ClientConfig) -> aio.Channel:
    """A channel to `config.address`: TLS when a CA is set, the token sent on every call,
    and `config.timeout` as the deadline of calls that set none."""
    interceptors = [_CallDefaults(config.token, config.timeout.total_seconds())]
    if config.tls_ca_file is None:
        return aio.insecure_channel(
            config.address, options=_CHANNEL_OPTIONS, interceptors=interceptors
        )
    credentials = grpc.ssl_channel_credentials(
        root_certificates=config.tls_ca_file.read_bytes(),
        private_key=config.tls_key_file.read_bytes() if config.tls_key_file else None,
        certificate_chain=config.tls_cert_file.read_bytes() if config.tls_cert_file else None,
    )
    return aio.secure_channel(
        config.address, credentials, options=_CHANNEL_OPTIONS, interceptors=interceptors
    )


class _CallDefaults(
    aio.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    aio.UnaryStreamClientInterceptor,  # type: ignore[misc]
):
    """Adds `authorization: Bearer <token>` and a default deadline to each call.

    Metadata rather than call credentials: gRPC refuses call credentials on plaintext
    channels, and the local stack runs plaintext.
    """

    def __init__(self, token: str | None, timeout: float) -> None:
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._timeout = timeout

    def _details(self, details: aio.ClientCallDetails) -> aio.ClientCallDetails:
        metadata = aio.Metadata(*(details.metadata or ()), *self._metadata)
        return aio.ClientCallDetails(
            method=details.method,
            timeout=details.timeout if details.timeout is not None else self._timeout,
            metadata=metadata,
            credentials=details.credentials,
            wait_for_ready=details.wait_for_ready,
        )

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._details(details), request)


_UNKNOWN_OUTCOME = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}

_BY_CODE: dict[grpc.StatusCode, Callable[[str], TombstoneError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.ALREADY_EXISTS: Conflict,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.DATA_LOSS: CorruptData,
}


def from_rpc_error(error: grpc.aio.AioRpcError, target: str) -> TombstoneError:
    """The typed error for a failed call to `target` (a service name, for the message)."""
    code, details = error.code(), error.details() or ""
    message = f"{target}: {code.name}: {details}"
    if code in _UNKNOWN_OUTCOME:
        return Unavailable(message)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        # The server writes "field: problem" (InvalidArgument); keep the field.
        field, _, problem = details.partition(": ")
        return InvalidArgument(field, problem) if problem else InvalidArgument(target, details)
    make = _BY_CODE.get(code, TombstoneError)
    return make(message)


@contextmanager
def rpc_errors(target: str) -> Iterator[None]:
    """Turn `AioRpcError` raised inside the block into the matching `TombstoneError`."""
    try:
        yield
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, target) from error
