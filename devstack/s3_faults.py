"""A fault-injecting HTTP proxy in front of the S3 server (moto), for failure tests.

Requests are forwarded unchanged (the Host header too, so signatures still match) unless a
fault is armed: then matching requests get an S3 error document with the chosen status and
code instead; `slow()` delays every answer for a while. It also counts requests by S3
operation, which lets tests see how deletes were batched without mocking the S3 API.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass
from types import TracebackType

import aiohttp
from aiohttp import web

_HOP_HEADERS = {"transfer-encoding", "content-length", "connection", "keep-alive"}


@dataclass
class Fault:
    status: int
    code: str
    operation: str | None
    """Only this S3 operation (e.g. "DeleteObjects"); None for every request."""
    remaining: int | None
    """Requests still to fail; None for no count limit."""
    until: float | None
    """Monotonic deadline; None for no time limit."""

    def applies(self, operation: str) -> bool:
        if self.operation is not None and operation != self.operation:
            return False
        if self.until is not None and time.monotonic() > self.until:
            return False
        return self.remaining is None or self.remaining > 0


def operation_of(request: web.Request) -> str:
    """The S3 operation a request performs (the subset the tests need)."""
    query = request.query
    key = request.path.strip("/").partition("/")[2]
    match request.method:
        case "POST" if "delete" in query:
            return "DeleteObjects"
        case "GET" if not key:
            return "ListObjects"
        case "GET":
            return "GetObject"
        case "HEAD":
            return "HeadObject" if key else "HeadBucket"
        case "PUT":
            return "PutObject" if key else "CreateBucket"
        case "DELETE":
            return "DeleteObject" if key else "DeleteBucket"
    return request.method


class S3FaultProxy:
    """Forwards to `upstream` (e.g. "http://127.0.0.1:5000"); use as an async context manager."""

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self._host = host
        self._port = port
        self.requests: collections.Counter[str] = collections.Counter()
        self.injected: collections.Counter[str] = collections.Counter()
        self._fault: Fault | None = None
        self._delay = 0.0
        self._slow_until = 0.0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://{self._host}:{self.port}"

    def fail(
        self,
        *,
        count: int | None = None,
        seconds: float | None = None,
        status: int = 503,
        code: str = "SlowDown",
        operation: str | None = None,
    ) -> None:
        """Answer matching requests with `status`/`code` (for `count` requests or `seconds`)."""
        until = time.monotonic() + seconds if seconds is not None else None
        self._fault = Fault(status, code, operation, count, until)

    def slow(self, delay: float, *, seconds: float) -> None:
        """Hold every request `delay` seconds before answering it, for the next `seconds`."""
        self._delay = delay
        self._slow_until = time.monotonic() + seconds

    def clear(self) -> None:
        self._fault = None
        self._slow_until = 0.0

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        sockets = site._server.sockets if site._server else []  # type: ignore[attr-defined]
        self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> S3FaultProxy:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        operation = operation_of(request)
        self.requests[operation] += 1
        if time.monotonic() < self._slow_until:
            await asyncio.sleep(self._delay)
        fault = self._fault
        if fault is not None and fault.applies(operation):
            if fault.remaining is not None:
                fault.remaining -= 1
            self.injected[operation] += 1
            return _error(fault.status, fault.code)
        return await self._forward(request)

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_HEADERS}
        url = f"{self.upstream}{request.rel_url}"
        try:
            async with self._session.request(
                request.method, url, headers=headers, data=body, allow_redirects=False
            ) as upstream:
                payload = await upstream.read()
                out = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP_HEADERS}
                return web.Response(status=upstream.status, body=payload, headers=out)
        except (TimeoutError, aiohttp.ClientError):
            return _error(502, "BadGateway")


def _error(status: int, code: str) -> web.Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f"<Error><Code>{code}</Code><Message>injected by the test proxy</Message>"
        "<RequestId>proxy</RequestId></Error>"
    )
    return web.Response(status=status, body=body.encode(), content_type="application/xml")
