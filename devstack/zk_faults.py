"""A TCP proxy in front of the ZooKeeper server, for tests: it counts requests by opcode and
can refuse opcodes the way a server without them does.

ZooKeeper frames are a 4-byte length then the body. The client's first frame is its
ConnectRequest; every later one starts with an xid and an opcode. A connection that starts
with a four-letter word instead (aiozk sends `srvr` before each session connection) is passed
through as raw bytes. Frames pass unchanged,
whole, in both directions. A refused opcode is answered as ZooKeeper answers one it does not
implement: a reply header (xid, last zxid, UNIMPLEMENTED) and no body, then the connection
is closed. Counting requests on the wire lets tests see how requests were batched without
mocking the ZooKeeper client. `cut(seconds)` drops every connection and refuses new ones for
a while: a cut longer than a client's session timeout expires its session, as a network
partition would. `slow(delay, seconds)` holds every reply `delay` seconds (in order, without
limiting throughput) for a while: a slow server or network, not a lost one.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import struct
import time
from types import TracebackType

_LENGTH = struct.Struct("!i")
_REQUEST_HEADER = struct.Struct("!ii")  # xid, opcode
_REPLY_HEADER = struct.Struct("!iqi")  # xid, zxid, err
UNIMPLEMENTED = -6
MULTI = 14
DELETE = 2


class ZooKeeperFaultProxy:
    """Forwards to `upstream_host:upstream_port`; use as an async context manager."""

    def __init__(self, upstream_host: str, upstream_port: int, *, host: str = "127.0.0.1"):
        self._upstream = (upstream_host, upstream_port)
        self._host = host
        self.port = 0
        self.requests: collections.Counter[int] = collections.Counter()
        """Requests seen, by opcode (refused ones included)."""
        self.refused: set[int] = set()
        """Opcodes answered with UNIMPLEMENTED instead of being forwarded."""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._refuse_until = 0.0
        self._open: set[asyncio.StreamWriter] = set()
        """Both ends of every proxied connection, for `cut`."""
        self.cuts = 0
        """How many times `cut()` ran."""
        self._delay = 0.0
        self._slow_until = 0.0

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    async def __aenter__(self) -> ZooKeeperFaultProxy:
        self._server = await asyncio.start_server(self._accept, self._host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    def cut(self, seconds: float) -> None:
        """Drop every open connection now and refuse new ones for `seconds` (they are
        accepted, then closed at once, as through a partition that resets connections)."""
        self.cuts += 1
        self._refuse_until = time.monotonic() + seconds
        for writer in list(self._open):
            writer.transport.abort()

    def slow(self, delay: float, *, seconds: float) -> None:
        """Hold each reply `delay` seconds before passing it on, for the next `seconds`
        (replies stay in order; a refusal is not delayed: do not combine the two)."""
        self._delay = delay
        self._slow_until = time.monotonic() + seconds

    def _reply_delay(self) -> float:
        return self._delay if time.monotonic() < self._slow_until else 0.0

    def restore(self) -> None:
        """Accept connections again (ends a `cut` early)."""
        self._refuse_until = 0.0

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self._refuse_until:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._open.add(writer)
        try:
            await self._serve(reader, writer)
        finally:
            writer.close()
            self._open.discard(writer)
            self._tasks.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            return
        self._open.add(up_writer)
        try:
            await self._serve_pair(reader, writer, up_reader, up_writer)
        finally:
            self._open.discard(up_writer)
            up_writer.close()

    async def _serve_pair(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        try:
            head = await reader.readexactly(_LENGTH.size)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        up_writer.write(head)
        if head.isalpha():  # a four-letter word
            pumps = [
                asyncio.create_task(_pipe(reader, up_writer)),
                asyncio.create_task(_pipe(up_reader, writer)),
            ]
        else:
            zxid = [0]  # the last zxid the server sent, for the refusals' reply headers
            pumps = [
                asyncio.create_task(self._requests(head, reader, writer, up_writer, zxid)),
                asyncio.create_task(self._replies(up_reader, writer, zxid)),
            ]
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pump in pumps:
                pump.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def _requests(
        self,
        head: bytes,
        reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        server: asyncio.StreamWriter,
        zxid: list[int],
    ) -> None:
        (length,) = _LENGTH.unpack(head)  # the ConnectRequest (no xid, no opcode); head is sent
        server.write(await reader.readexactly(length))
        while True:
            frame = await _frame(reader)
            xid, opcode = _REQUEST_HEADER.unpack_from(frame, _LENGTH.size)
            self.requests[opcode] += 1
            if opcode in self.refused:
                reply = _REPLY_HEADER.pack(xid, zxid[0], UNIMPLEMENTED)
                client.write(_LENGTH.pack(len(reply)) + reply)
                await client.drain()
                return  # then the connection closes, as ZooKeeper's does
            server.write(frame)
            await server.drain()

    async def _replies(
        self, reader: asyncio.StreamReader, client: asyncio.StreamWriter, zxid: list[int]
    ) -> None:
        client.write(await _frame(reader))  # ConnectResponse: no reply header
        due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.create_task(_send_when_due(due, client))
        try:
            while True:
                frame = await _frame(reader)
                (seen,) = struct.unpack_from("!q", frame, _LENGTH.size + 4)
                zxid[0] = max(zxid[0], seen)  # watch events carry -1
                due.put_nowait((time.monotonic() + self._reply_delay(), frame))
                if sender.done():
                    return  # the client went away
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                await sender


async def _send_when_due(
    due: asyncio.Queue[tuple[float, bytes]], client: asyncio.StreamWriter
) -> None:
    """Write each reply at its time, in order (whole frames only: never interleaved)."""
    while True:
        when, frame = await due.get()
        wait = when - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        client.write(frame)
        await client.drain()


async def _frame(reader: asyncio.StreamReader) -> bytes:
    """One whole frame, its length prefix included; `IncompleteReadError` at EOF."""
    head = await reader.readexactly(_LENGTH.size)
    (length,) = _LENGTH.unpack(head)
    return head + await reader.readexactly(length)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy raw bytes until EOF."""
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()
