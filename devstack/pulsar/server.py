"""Starting and stopping the broker: the binary listener, the admin HTTP server, restarts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from aiohttp import web

from . import handlers  # noqa: F401 - fills Connection.handlers
from .admin import make_app
from .broker import Broker, BrokerConfig
from .connection import Connection
from .issuer import Issuer, make_issuer_app

log = logging.getLogger(__name__)


class BrokerServer:
    """One broker with its two listeners. `restart_broker` reloads state from the store."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker = Broker(config)
        self._server: asyncio.Server | None = None
        self._runner: web.AppRunner | None = None
        self.port = config.port
        self.admin_port = config.admin_port
        self.issuer_port: int | None = None
        """Where the OAuth2 issuer listens, when the security settings run one."""
        self.issuer: Issuer | None = None
        self._issuer_runner: web.AppRunner | None = None
        security = config.security
        self._ssl = security.server_context() if security is not None else None

    async def start(self) -> None:
        await self._start_listener()
        self._runner, self.admin_port = await self._serve_http(make_app(self), self.admin_port)
        self.broker.admin_port = self.admin_port
        security = self.config.security
        if security is not None and security.issuer_signing_key and security.issuer_clients:
            self.issuer = Issuer(
                security.issuer_signing_key,
                security.issuer_clients,
                lifetime=security.issuer_token_lifetime,
            )
            self._issuer_runner, self.issuer_port = await self._serve_http(
                make_issuer_app(self.issuer), self.config.issuer_port
            )
        log.info("broker ready on %s:%d, admin on %d", self.config.host, self.port, self.admin_port)

    async def _serve_http(self, app: web.Application, port: int) -> tuple[web.AppRunner, int]:
        """Serve `app` (over TLS when the broker has it); the runner and the bound port."""
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.config.host, port, ssl_context=self._ssl)
        await site.start()
        return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _start_listener(self) -> None:
        loop = asyncio.get_running_loop()
        broker = self.broker
        self._server = await loop.create_server(
            lambda: Connection(broker),
            self.config.host,
            self.port,
            reuse_address=True,
            ssl=self._ssl,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        broker.port = self.port

    async def _stop_listener(self) -> None:
        """Close producers and consumers from the broker side, then the connections."""
        if self._server is None:
            return
        self._server.close()
        self.broker.close_all_clients()
        for conn in list(self.broker.connections):
            conn.close_gracefully()
        await asyncio.sleep(0)
        for conn in list(self.broker.connections):
            conn.abort()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), timeout=5)
        self._server = None
        self.broker.close()

    async def restart_broker(self) -> None:
        """Stop serving, reload everything from the store (nothing, in memory) and serve again."""
        await self._stop_listener()
        self.broker = Broker(self.config)
        await self._start_listener()

    async def stop(self) -> None:
        await self._stop_listener()
        for runner in (self._runner, self._issuer_runner):
            if runner is not None:
                await runner.cleanup()
        self._runner = self._issuer_runner = None


async def serve(config: BrokerConfig) -> None:
    """Run until SIGTERM or SIGINT; print one readiness line with the bound ports."""
    server = BrokerServer(config)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    issuer = f" issuer_port={server.issuer_port}" if server.issuer_port else ""
    print(f"READY port={server.port} admin_port={server.admin_port}{issuer}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
