"""Prometheus metrics on a per-service registry, served on `/metrics`.

Each service owns a `CollectorRegistry` rather than the process-global one, so several
services (and tests) can live in one process without name clashes. The HTTP endpoint runs on
the service's own event loop (aiohttp): it starts and stops with the service, reports the
bound port when asked for port 0, and a scrape that times out is itself a sign that the loop
is blocked.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence

import prometheus_client
import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.core.version import DISTRIBUTION, version

__all__ = ["DISTRIBUTION", "PREFIX", "Metrics", "version"]

PREFIX = "tombstone_"


class Metrics:
    """Factory of `tombstone_*` metrics, all registered in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()

    def counter(self, name: str, help: str, labels: Sequence[str] = ()) -> Counter:
        """A counter named `tombstone_<name>` (Prometheus adds `_total`)."""
        return Counter(PREFIX + name, help, labels, registry=self.registry)

    def gauge(self, name: str, help: str, labels: Sequence[str] = ()) -> Gauge:
        """A gauge named `tombstone_<name>`."""
        return Gauge(PREFIX + name, help, labels, registry=self.registry)

    def histogram(
        self,
        name: str,
        help: str,
        labels: Sequence[str] = (),
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
    ) -> Histogram:
        """A histogram named `tombstone_<name>`; seconds unless the name says otherwise."""
        return Histogram(PREFIX + name, help, labels, registry=self.registry, buckets=buckets)

    def build_info(self, service: str) -> None:
        """`tombstone_build_info{service,version,python} 1`: which build answers a scrape (and,
        joined on `instance`, which build raised an alert)."""
        info = self.gauge(
            "build_info", "Always 1; the labels name the build.", ["service", "version", "python"]
        )
        info.labels(service, version(), platform.python_version()).set(1)

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return prometheus_client.generate_latest(self.registry)


class MetricsServer:
    """`GET /metrics` over HTTP on the running event loop."""

    def __init__(self, metrics: Metrics, *, host: str, port: int) -> None:
        self._metrics = metrics
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        """The bound port once started."""

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/metrics", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self.port = int(self._runner.addresses[0][1])
        structlog.get_logger(__name__).info("metrics_ready", host=self._host, port=self.port)
        return self.port

    async def stop(self) -> None:
        """Idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        return web.Response(
            body=self._metrics.render(),
            headers={"Content-Type": prometheus_client.CONTENT_TYPE_LATEST},
        )
