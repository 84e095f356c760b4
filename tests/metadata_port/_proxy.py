"""A TCP proxy that can hold every byte in flight (a network that stops answering without
closing anything) and let it through later."""

from __future__ import annotations

import asyncio
import contextlib
import threading


class FreezingProxy:
    """Forwards `listen_host:port` to `target_host:port` from its own event loop thread."""

    def __init__(self, listen_host: str, target_host: str, port: int) -> None:
        self._listen = listen_host
        self._target = target_host
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._open = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    async def _start(self) -> None:
        self._open.set()
        self._server = await asyncio.start_server(self._handle, self._listen, self._port)

    def freeze(self) -> None:
        """Hold every byte from now on (nothing is closed, nothing is answered)."""
        self._loop.call_soon_threadsafe(self._open.clear)

    def thaw(self) -> None:
        """Let the held bytes through, and what follows."""
        self._loop.call_soon_threadsafe(self._open.set)

    def stop(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self._target, self._port)
        except OSError:
            writer.close()
            return
        async with asyncio.TaskGroup() as group:
            group.create_task(self._pump(reader, up_writer))
            group.create_task(self._pump(up_reader, writer))

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(65536):
                await self._open.wait()
                sink.write(data)
                await sink.drain()
        sink.close()
