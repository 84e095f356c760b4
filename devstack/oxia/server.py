"""The devstack Oxia server: `OxiaService` on a grpc.aio server, in the foreground or in a
background thread (for synchronous callers such as the `oxia` client's tests)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import grpc

from . import schema
from .service import Abort, OxiaService

DEFAULT_NAMESPACE = "default"


#: Oxia's version ids are int64.
MAX_VERSION_ID = 2**63 - 1


class OxiaServer:
    """One Oxia "standalone" server: each of `namespaces` (default: Oxia's `default`) with
    `shards` shards of its own, all led here. `first_version_id`: the version id of each
    shard's first put (0 on a new Oxia server; a high one stands for a server that has taken
    that many writes, for tests of version ids beyond 32 bits)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        shards: int = 1,
        namespaces: Sequence[str] = (DEFAULT_NAMESPACE,),
        advertised_host: str | None = None,
        first_version_id: int = 0,
    ) -> None:
        if shards < 1:
            raise ValueError("an Oxia server needs at least one shard")
        if not 0 <= first_version_id <= MAX_VERSION_ID:
            raise ValueError(f"first_version_id must be in [0, {MAX_VERSION_ID}]")
        if len(set(namespaces)) != len(namespaces):
            raise ValueError(f"a namespace is named twice: {', '.join(namespaces)}")
        self._host = host
        self._requested_port = port
        self._advertised = advertised_host or host
        self.port = 0
        self.service = OxiaService(
            dict.fromkeys(namespaces, shards), lambda: self.address, first_version_id
        )
        self._server: grpc.aio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def address(self) -> str:
        return f"{self._advertised}:{self.port}"

    async def start(self) -> None:
        # gRPC sets SO_REUSEPORT by default: a second server on a busy port would share it
        # silently instead of failing.
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((_handler(self.service),))
        where = f"{self._host}:{self._requested_port}"
        try:
            self.port = server.add_insecure_port(where)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {where}: {exc}") from None
        if self.port == 0:
            raise OSError(f"cannot listen on {where}")
        await server.start()
        self._server = server
        self._loop = asyncio.get_running_loop()

    def drop_notification_streams(self) -> None:
        """End every open GetNotifications stream with UNAVAILABLE (callable from any
        thread): the clients must reconnect and resume from their last offsets."""
        assert self._loop is not None, "the server is not started"
        for shard in self.service.shards.values():
            self._loop.call_soon_threadsafe(shard.notifications.drop_followers)

    def expire_sessions(self, timeout: float = 30.0) -> None:
        """Expire every live session of every shard, as Oxia does when a session's timeout
        passes without a heartbeat: its ephemeral records are deleted and its id is unknown
        from then on. Called from a thread other than the server's; returns once done, so
        a session opened afterwards is not expired."""
        assert self._loop is not None, "the server is not started"

        async def expire() -> None:
            for shard in self.service.shards.values():
                shard.expire_sessions()

        asyncio.run_coroutine_threadsafe(expire(), self._loop).result(timeout)

    def stop_from_thread(self, timeout: float = 30.0) -> None:
        """Stop a server started in another thread's loop now, without grace (as a crash
        would end it): open streams end, new calls find no server."""
        assert self._loop is not None, "the server is not started"
        asyncio.run_coroutine_threadsafe(self.stop(grace=0), self._loop).result(timeout)

    def halt_from_thread(self, timeout: float = 30.0) -> None:
        """Stop serving now, as a crashed server whose storage survives: open streams end and
        new calls find no server, while the records and the sessions stay. A session's
        timeout keeps running (no heartbeat can arrive), so an outage longer than it expires
        the session as Oxia would once back. `restart_from_thread` serves them again."""
        assert self._loop is not None, "the server is not started"
        asyncio.run_coroutine_threadsafe(self._halt(), self._loop).result(timeout)

    def restart_from_thread(self, timeout: float = 30.0) -> None:
        """Serve again, on the same port, what a halt left (clients reconnect to the address
        they knew)."""
        assert self._loop is not None, "the server is not started"
        asyncio.run_coroutine_threadsafe(self._restart(), self._loop).result(timeout)

    async def _halt(self) -> None:
        self.service.stopping.set()
        if self._server is not None:
            await self._server.stop(0)
            self._server = None

    async def _restart(self) -> None:
        assert self._server is None, "the server is serving"
        self.service.stopping = asyncio.Event()
        self._requested_port = self.port
        await self.start()

    async def stop(self, grace: float = 1.0) -> None:
        self.service.stopping.set()
        for shard in self.service.shards.values():
            shard.close()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None


def _handler(service: OxiaService) -> grpc.GenericRpcHandler:
    handlers = {}
    for name, (request, response, client_streams, server_streams) in schema.METHODS.items():
        method = getattr(service, name)
        behaviour = _streaming(method) if server_streams else _unary(method)
        kind = _KINDS[(client_streams, server_streams)]
        handlers[name] = kind(
            behaviour,
            request_deserializer=schema.message(request).FromString,
            response_serializer=schema.message(response).SerializeToString,
        )
    return grpc.method_handlers_generic_handler(schema.SERVICE, handlers)


_KINDS: dict[tuple[bool, bool], Callable[..., grpc.RpcMethodHandler]] = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _unary(method: Callable[[Any], Any]) -> Callable[[Any, grpc.aio.ServicerContext], Any]:
    @functools.wraps(method)
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await method(request)
        except Abort as exc:
            await context.abort(exc.code, str(exc))

    return call


def _streaming(
    method: Callable[[Any], AsyncIterator[Any]],
) -> Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]:
    assert inspect.isasyncgenfunction(method)

    @functools.wraps(method)
    async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for response in method(request):
                yield response
        except Abort as exc:
            await context.abort(exc.code, str(exc))

    return call


@contextlib.contextmanager
def running_in_thread(
    *,
    shards: int = 1,
    host: str = "127.0.0.1",
    advertised_host: str | None = None,
    namespaces: Sequence[str] = (DEFAULT_NAMESPACE,),
    first_version_id: int = 0,
) -> Iterator[OxiaServer]:
    """A server on a free port, served by an event loop in a daemon thread until exit.
    `advertised_host`: the host named as every shard's leader (a proxy's, in fault tests);
    `namespaces`: each served with `shards` shards of its own; `first_version_id`: as
    `OxiaServer`'s."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="oxia-devstack", daemon=True)
    thread.start()
    server = OxiaServer(
        host=host,
        shards=shards,
        namespaces=namespaces,
        advertised_host=advertised_host,
        first_version_id=first_version_id,
    )
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=30)
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(grace=0.2), loop).result(timeout=30)
        # Streams the server cut off leave their generators to be closed, in the server's
        # own loop: the caller may be running a loop of its own (the demo's).
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()
