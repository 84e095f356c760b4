"""A fault-injecting HTTP proxy in front of the S3 server (moto), for failure tests.

Requests are forwarded unchanged (the Host header too, so signatures still match) unless a
fault is armed: then matching requests get an S3 error document with the chosen status and
code instead; `slow()` delays every answer for a while. It also counts requests by S3
operation, which lets tests see how deletes were batched without mocking the S3 API.
`answer_deletes()` rewrites the answers of DeleteObjects requests that moto carried out: keys
reported failed with a per-key error code, or left out of the answer, as a store that fails
some keys of a request (or answers incompletely) does.
"""

from __future__ import annotations

import asyncio
import collections
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from xml.sax.saxutils import escape

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
        self._key_errors: dict[str, str] = {}
        self._unreported: set[str] = set()
        self._pretend = False
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

    def answer_deletes(
        self,
        *,
        errors: Mapping[str, str] | None = None,
        unreported: Iterable[str] = (),
        carried_out: bool = True,
    ) -> None:
        """From now on, DeleteObjects answers report each key of `errors` failed with its code
        and leave each key of `unreported` out; moto has deleted them all the same. Without
        `carried_out`, requests are not forwarded at all and every key is answered `Deleted`:
        a store that claims deletes it did not make."""
        self._key_errors = dict(errors or {})
        self._unreported = set(unreported)
        self._pretend = not carried_out

    def clear(self) -> None:
        self._fault = None
        self._slow_until = 0.0
        self._key_errors = {}
        self._unreported = set()
        self._pretend = False

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
        if operation == "DeleteObjects" and self._pretend:
            return web.Response(
                body=_all_deleted(await request.read()), content_type="application/xml"
            )
        response = await self._forward(request)
        if operation == "DeleteObjects" and (self._key_errors or self._unreported):
            assert isinstance(response.body, bytes)
            response.body = _rewrite_delete_result(
                response.body, self._key_errors, self._unreported
            )
        return response

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


def _rewrite_delete_result(body: bytes, errors: Mapping[str, str], unreported: set[str]) -> bytes:
    """A DeleteResult document with the `Deleted` entries of `errors` turned into `Error`
    entries and those of `unreported` removed."""
    root = ET.fromstring(body)
    namespace = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
    for entry in list(root):
        if entry.tag != f"{namespace}Deleted":
            continue
        key = entry.findtext(f"{namespace}Key") or ""
        if key in unreported or key in errors:
            root.remove(entry)
        if key in errors:
            error = ET.SubElement(root, f"{namespace}Error")
            for name, text in (("Key", key), ("Code", errors[key]), ("Message", "injected")):
                ET.SubElement(error, f"{namespace}{name}").text = text
    ET.register_namespace("", namespace.strip("{}"))
    rewritten: bytes = ET.tostring(root, xml_declaration=True, encoding="UTF-8")
    return rewritten


def _all_deleted(request_body: bytes) -> bytes:
    """A DeleteResult naming every key of a Delete request `Deleted`."""
    request = ET.fromstring(request_body)
    namespace = request.tag.partition("}")[0] + "}" if request.tag.startswith("{") else ""
    keys = [obj.findtext(f"{namespace}Key") or "" for obj in request.iter(f"{namespace}Object")]
    deleted = "".join(f"<Deleted><Key>{escape(key)}</Key></Deleted>" for key in keys)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{deleted}</DeleteResult>'
    ).encode()
