"""Server interceptors: per-call log context, token auth with roles, and error mapping.

Each interceptor wraps the method handler's behaviour, so its code runs inside the RPC's own
task and contextvars bound there reach every log line of the call. Order (outermost first):
logging, errors, auth, decoding — so an auth refusal is mapped like any other `TombstoneError`
and logged with the method and request id, and a caller's bytes are parsed only once it is
authorized.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import grpc
import structlog
from grpc import aio

from services.core._tokens import Principal
from services.core.config import AuthConfig
from services.core.errors import InvalidArgument, PermissionDenied, TombstoneError, Unauthenticated
from services.core.metrics import Metrics

_log = structlog.get_logger(__name__)

Behaviour = Callable[[Any, aio.ServicerContext], Any]
Wrapper = Callable[[Behaviour, str], Behaviour]

# Health checks and reflection stay open so probes and grpcurl work without a token.
OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.v1alpha.", "/grpc.reflection.v1.")


def _wrap_handler(handler: grpc.RpcMethodHandler, method: str, wrap: Wrapper) -> Any:
    """A handler of the same kind whose behaviour is `wrap(behaviour)`."""
    kinds = (
        ("unary_unary", grpc.unary_unary_rpc_method_handler),
        ("unary_stream", grpc.unary_stream_rpc_method_handler),
        ("stream_unary", grpc.stream_unary_rpc_method_handler),
        ("stream_stream", grpc.stream_stream_rpc_method_handler),
    )
    for attribute, make in kinds:
        behaviour = getattr(handler, attribute)
        if behaviour is not None:
            return make(
                wrap(behaviour, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
    return handler


class _WrappingInterceptor(aio.ServerInterceptor):  # type: ignore[misc]
    """Base: run every call, unary or streaming, inside `self.scope(method, context)`."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        # The registered handler of a method never changes: wrap it once, not per call.
        cached = self._wrapped.get(handler_call_details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrap = self._wrap_stream if handler.response_streaming else self._wrap_unary
        wrapped = _wrap_handler(handler, handler_call_details.method, wrap)
        self._wrapped[handler_call_details.method] = (handler, wrapped)
        return wrapped

    def _wrap_unary(self, behaviour: Behaviour, method: str) -> Behaviour:
        async def unary(request: Any, context: aio.ServicerContext) -> Any:
            async with self.scope(method, context):
                return await behaviour(request, context)

        return unary

    def _wrap_stream(self, behaviour: Behaviour, method: str) -> Behaviour:
        async def stream(request: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
            # The scope spans every yield: the generator runs in the call's own task, so the
            # contextvars it binds stay valid, and errors raised mid-stream are mapped too.
            async with self.scope(method, context):
                result = behaviour(request, context)
                if inspect.isasyncgen(result):
                    async for item in result:
                        yield item
                else:
                    await result

        return stream

    def scope(self, method: str, context: aio.ServicerContext) -> AbstractAsyncContextManager[None]:
        raise NotImplementedError


class LoggingInterceptor(_WrappingInterceptor):
    """Binds `rpc.method` and `request_id` for the call, and logs and counts its outcome."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self._calls = metrics.counter("rpc_calls", "gRPC calls served", ("method", "code"))
        self._seconds = metrics.histogram("rpc_seconds", "gRPC call duration", ("method",))

    @asynccontextmanager
    async def scope(self, method: str, context: aio.ServicerContext) -> AsyncIterator[None]:
        metadata = dict(context.invocation_metadata() or ())
        request_id = str(metadata.get("x-request-id") or uuid.uuid4().hex)
        started = time.monotonic()
        code = grpc.StatusCode.OK
        with structlog.contextvars.bound_contextvars(
            **{"rpc.method": method, "request_id": request_id}
        ):
            try:
                yield
            except BaseException:
                code = context.code() or grpc.StatusCode.CANCELLED
                raise
            finally:
                elapsed = time.monotonic() - started
                self._calls.labels(method, code.name).inc()
                self._seconds.labels(method).observe(elapsed)
                _log.debug("rpc_done", code=code.name, seconds=round(elapsed, 6))


MAX_DETAILS = 1024


def bounded(details: str) -> str:
    """`details`, or its start and how long it was when it is longer than `MAX_DETAILS`."""
    if len(details) <= MAX_DETAILS:
        return details
    return f"{details[: MAX_DETAILS - 40]}... ({len(details)} characters)"


class ErrorInterceptor(_WrappingInterceptor):
    """`TombstoneError` → its status; anything else → INTERNAL, logged with its traceback.

    Cancellation and aborts pass through untouched: the server never crashes on a handler bug.
    The status message is cut to `MAX_DETAILS` characters: it travels in a trailer, and a
    message echoing a caller's 70 KB name would exceed grpc's metadata limit, turning the
    INVALID_ARGUMENT into a RESOURCE_EXHAUSTED. The field name comes first, so it survives.
    """

    @asynccontextmanager
    async def scope(self, method: str, context: aio.ServicerContext) -> AsyncIterator[None]:
        try:
            yield
        except aio.AbortError:
            raise
        except TombstoneError as err:
            details = bounded(str(err))
            _log.info("rpc_failed", code=err.grpc_code.name, error=details)
            await context.abort(err.grpc_code, details)
        except Exception:
            _log.exception("rpc_internal_error")
            request_id = structlog.contextvars.get_contextvars().get("request_id", "")
            await context.abort(
                grpc.StatusCode.INTERNAL, f"internal error (request_id={request_id})"
            )


class AuthInterceptor(_WrappingInterceptor):
    """`authorization: Bearer <token>` with roles per method; fails closed.

    A missing or unknown token is UNAUTHENTICATED; a known token without a role the method
    allows (or a method with no roles listed) is PERMISSION_DENIED. Health and reflection are
    always open; with auth disabled, every call is allowed.
    """

    def __init__(self, config: AuthConfig, method_roles: Mapping[str, Collection[str]]) -> None:
        super().__init__()
        self._config = config
        self._method_roles = {method: frozenset(roles) for method, roles in method_roles.items()}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        method = handler_call_details.method
        if not self._config.enabled or method.startswith(OPEN_SERVICES):
            return await continuation(handler_call_details)
        return await super().intercept_service(continuation, handler_call_details)

    @asynccontextmanager
    async def scope(self, method: str, context: aio.ServicerContext) -> AsyncIterator[None]:
        principal = self.authorize(method, dict(context.invocation_metadata() or ()))
        with structlog.contextvars.bound_contextvars(subject=principal.subject):
            yield

    def authorize(self, method: str, metadata: Mapping[str, Any]) -> Principal:
        """The caller, if allowed to call `method`; raises otherwise."""
        header = str(metadata.get("authorization", ""))
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("missing 'authorization: Bearer <token>' metadata")
        principal = self._config.tokens.get(token.strip())
        if principal is None:
            raise Unauthenticated("unknown token")
        allowed = self._method_roles.get(method, frozenset())
        if not principal.roles & allowed:
            raise PermissionDenied(
                f"{principal.subject} (roles {', '.join(sorted(principal.roles))}) "
                f"may not call {method}"
            )
        return principal


class DecodingInterceptor(aio.ServerInterceptor):  # type: ignore[misc]
    """Parses unary requests inside the call, after auth, so bad bytes are a bad request.

    Left to grpc, a request that is not valid protobuf (a cut varint, bad UTF-8 in a string)
    fails before any interceptor runs: the caller gets UNKNOWN whatever its token, and the
    log gets a traceback. Here the handler receives the raw bytes and the wrapped behaviour
    parses them: a failure is `InvalidArgument("request", ...)`, INVALID_ARGUMENT like any
    other malformed field, and an unauthenticated caller is refused before its bytes are read.
    """

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, Any]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        cached = self._wrapped.get(handler_call_details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = _decoding_handler(handler)
        self._wrapped[handler_call_details.method] = (handler, wrapped)
        return wrapped


def _decoding_handler(handler: grpc.RpcMethodHandler) -> Any:
    parse = handler.request_deserializer
    kind, make = (
        (handler.unary_stream, grpc.unary_stream_rpc_method_handler)
        if handler.response_streaming
        else (handler.unary_unary, grpc.unary_unary_rpc_method_handler)
    )

    def decode(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as exc:  # DecodeError, or a UnicodeDecodeError from a string field
            raise InvalidArgument("request", f"not a valid protobuf message ({exc})") from None

    if handler.response_streaming:

        async def stream(request: bytes, context: aio.ServicerContext) -> AsyncIterator[Any]:
            result = kind(decode(request), context)
            if inspect.isasyncgen(result):
                async for item in result:
                    yield item
            else:
                await result

        behaviour: Any = stream
    else:

        async def unary(request: bytes, context: aio.ServicerContext) -> Any:
            return await kind(decode(request), context)

        behaviour = unary
    return make(
        behaviour, request_deserializer=None, response_serializer=handler.response_serializer
    )
