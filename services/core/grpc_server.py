"""The one way to run a Tombstone service: start, serve, drain and stop.

A service's `app.py` opens a `ServiceRunner`, enters its clients on `runner.resources`, adds
its servicers and background loops, and awaits `runner.run()`:

    async with ServiceRunner(name="verifier", grpc=config.grpc, metrics=config.metrics,
                             method_roles=METHOD_ROLES) as runner:
        zk = await runner.resources.enter_async_context(open_zookeeper(config.zookeeper))
        runner.add_servicer(add_VerifierServicer_to_server, VerifierServicer(zk), SERVICE)
        runner.add_background("believed_expiry", expiry.run)
        await runner.run()

Health has two meanings, told apart by the service name a health check asks about:

- `liveness`: SERVING from start until shutdown begins, whatever the dependencies do. The
  health servicer runs on the service's event loop, so an answer proves the loop turns; a
  process that cannot answer is the only one a restart can help.
- readiness: `""` (the whole server), `readiness` and each registered service's own name
  (`tombstone.v1.Deleter`...). SERVING while the service can do its work: every condition
  given to `set_ready` holds (`set_serving` is the service's own; `follow_session` keeps one
  per ZooKeeper session). NOT_SERVING while it is paused on an outage or holds its work back.
  `""` stays a readiness check because it is what health clients ask by default (the
  deleter's probe of the verifier, `grpc_health_probe`, a Kubernetes `grpc` probe with no
  `service`): a client that asked "can you take work" before liveness existed keeps getting
  that answer.

`run()` returns after SIGTERM or SIGINT once the fixed shutdown sequence is done:
health NOT_SERVING → `server.stop(grace)` (in-flight RPCs finish within grace) → background
tasks cancelled → metrics endpoint closed → resources closed in reverse. A background task
that fails triggers the same sequence, then `run()` raises `BackgroundTaskFailed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Collection, Mapping
from types import TracebackType
from typing import Any, Protocol, TypeVar

import grpc
import structlog
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from services.core._interceptors import (
    AuthInterceptor,
    DecodingInterceptor,
    ErrorInterceptor,
    LoggingInterceptor,
)
from services.core.config import GrpcServerConfig, MetricsConfig, TlsServerConfig
from services.core.errors import TombstoneError
from services.core.metrics import Metrics, MetricsServer
from services.core.tasks import is_cancelled

_log = structlog.get_logger(__name__)

S = TypeVar("S")
Background = Callable[[], Awaitable[None]]


LIVENESS = "liveness"
"""The health service name that answers SERVING for as long as the process serves."""
READINESS = "readiness"
"""A health service name that answers like `""`: SERVING only while the service can work."""


class BackgroundTaskFailed(TombstoneError):
    """A background loop stopped with an error; the service shut down because of it."""


class ServiceRunner:
    """Owns the gRPC server, health, reflection, metrics, background tasks and resources."""

    def __init__(
        self,
        *,
        name: str,
        grpc: GrpcServerConfig,
        method_roles: Mapping[str, Collection[str]],
        metrics: MetricsConfig | None = None,
        handle_signals: bool = True,
    ) -> None:
        """`method_roles` maps full method names (`/tombstone.v1.Verifier/Verify`) to the roles
        allowed to call them; methods not listed are refused when auth is on."""
        self.name = name
        self.metrics = Metrics()
        """The service's metrics; create its own metrics with `runner.metrics.counter(...)`."""
        self.metrics.build_info(name)
        self.metrics.gauge(
            "auth_disabled_exposed",
            "1 when the gRPC server listens beyond loopback with no authentication "
            "(TOMBSTONE_AUTH_ENABLED=false); 0 otherwise.",
        ).set(1 if grpc.unauthenticated_exposure else 0)
        self.resources = contextlib.AsyncExitStack()
        """Clients entered here are closed in reverse at the end of shutdown."""
        self.port: int | None = None
        """The bound gRPC port once started."""
        self._config = grpc
        self._method_roles = method_roles
        self._metrics_config = metrics
        self._handle_signals = handle_signals
        self._stop = asyncio.Event()
        self._server: aio.Server | None = None
        self._health = HealthServicer()
        self._ready: dict[str, bool] = {}
        """Readiness conditions by name; readiness is SERVING when all hold."""
        self._service_names: list[str] = []
        self._registrations: list[Callable[[aio.Server], None]] = []
        self._background: list[tuple[str, Background]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._failure: BaseException | None = None
        self._metrics_server: MetricsServer | None = None
        self._shutdown_lock = asyncio.Lock()
        self._shut_down = False

    # --- setup -------------------------------------------------------------------------

    def add_servicer(
        self, add_to_server: Callable[[S, aio.Server], None], servicer: S, service_name: str
    ) -> None:
        """Register a generated `add_XServicer_to_server`, the servicer and its full name."""
        self._registrations.append(lambda server: add_to_server(servicer, server))
        self._service_names.append(service_name)

    def add_background(self, name: str, run: Background) -> None:
        """A loop that runs while the service serves; it is cancelled at shutdown."""
        self._background.append((name, run))

    @property
    def stopping(self) -> asyncio.Event:
        """Set once a stop was requested (signal, `request_stop()` or a failed task)."""
        return self._stop

    @property
    def metrics_port(self) -> int | None:
        """The bound port of `/metrics`, or None when the endpoint is off."""
        return self._metrics_server.port if self._metrics_server else None

    async def set_serving(self, serving: bool) -> None:
        """The service's own readiness condition: False while it paused its work on an
        outage or holds it back (it is alive but not doing its job, so `liveness` stays
        SERVING)."""
        await self.set_ready("service", serving)

    async def set_ready(self, condition: str, ready: bool) -> None:
        """Record one readiness condition; readiness is SERVING while all of them hold. The
        health status changes only once started, and never once shutdown has begun."""
        was = self._ready.get(condition, True)
        self._ready[condition] = ready
        if was != ready:
            _log.info("readiness_condition", service=self.name, condition=condition, ready=ready)
        if self._server is None or self._shut_down:
            return
        for service in self._readiness_names():
            await self._health.set(service, self._readiness_status())

    def _readiness_status(self) -> health_pb2.HealthCheckResponse.ServingStatus.ValueType:
        if all(self._ready.values()):
            return health_pb2.HealthCheckResponse.SERVING
        return health_pb2.HealthCheckResponse.NOT_SERVING

    def _readiness_names(self) -> list[str]:
        return ["", READINESS, *self._service_names]

    def request_stop(self) -> None:
        self._stop.set()

    async def __aenter__(self) -> ServiceRunner:
        if self._handle_signals:
            self._install_signal_handlers()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        _log.info("stop_signal", service=self.name, signal=sig.name)
        self._stop.set()
        # A second signal gets the default action (terminate) if draining hangs.
        asyncio.get_running_loop().remove_signal_handler(sig)

    # --- serving -----------------------------------------------------------------------

    async def start(self) -> int:
        """Bind, start serving, mark every service SERVING and log `service_ready`."""
        server = aio.server(
            interceptors=[
                LoggingInterceptor(self.metrics),
                ErrorInterceptor(),
                AuthInterceptor(self._config.auth, self._method_roles),
                DecodingInterceptor(),
            ],
            options=_server_options(self._config),
        )
        self._server = server
        self._register_services(server)
        self.port = _bind(server, self._config)
        if self._config.unauthenticated_exposure:
            _log.warning(
                "auth_disabled_on_exposed_address",
                service=self.name,
                host=self._config.host,
                port=self.port,
            )
        await server.start()
        await self._health.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
        for service in self._readiness_names():
            await self._health.set(service, self._readiness_status())
        await self._start_metrics()
        _log.info(
            "service_ready",
            service=self.name,
            host=self._config.host,
            port=self.port,
            tls=self._config.tls is not None,
            auth=self._config.auth.enabled,
        )
        return self.port

    def _register_services(self, server: aio.Server) -> None:
        for register in self._registrations:
            register(server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        health_name = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name
        reflection.enable_server_reflection(
            [*self._service_names, health_name, reflection.SERVICE_NAME], server
        )

    async def _start_metrics(self) -> None:
        config = self._metrics_config
        if config is not None and config.port:
            self._metrics_server = MetricsServer(self.metrics, host=config.host, port=config.port)
            await self._metrics_server.start()

    async def run(self) -> None:
        """Serve until stopped, then shut down. Raises `BackgroundTaskFailed` after a crash."""
        if self._server is None:
            await self.start()
        async with asyncio.TaskGroup() as group:
            self._tasks = [
                group.create_task(self._guard(name, job), name=name)
                for name, job in self._background
            ]
            await self._stop.wait()
            await self.shutdown()
        if self._failure is not None:
            raise BackgroundTaskFailed(f"{self.name}: a background task failed") from (
                self._failure
            )

    async def _guard(self, name: str, job: Background) -> None:
        try:
            await job()
        except BaseException as exc:
            if is_cancelled(exc):
                raise
            _log.exception("background_task_failed", service=self.name, task=name)
            self._failure = exc
            self._stop.set()
        else:
            _log.info("background_task_finished", service=self.name, task=name)

    async def shutdown(self) -> None:
        """The fixed stop sequence; idempotent and safe to call before `start()`."""
        async with self._shutdown_lock:
            if self._shut_down:
                return
            self._shut_down = True
            self._stop.set()
            try:
                await self._stop_serving()
            finally:
                await self.resources.aclose()
            _log.info("service_stopped", service=self.name)

    async def _stop_serving(self) -> None:
        if self._server is not None:
            await self._health.enter_graceful_shutdown()
            await self._server.stop(self._config.grace_period.total_seconds())
        for task in self._tasks:
            task.cancel()
        # Wait for the cancelled tasks here (the task group would too) so that resources
        # close only after nothing uses them any more.
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._metrics_server is not None:
            await self._metrics_server.stop()


class Session(Protocol):
    """A dependency with a connection state (`ZkMetadataStore`)."""

    @property
    def connected(self) -> bool: ...

    async def wait_connected(self) -> None: ...

    def connection_lost(self) -> asyncio.Future[None]: ...


async def follow_session(runner: ServiceRunner, condition: str, session: Session) -> None:
    """Readiness follows `session`: the condition holds while it is connected. Run it as a
    background task; a session that reconnects makes the service ready again."""
    while True:
        # Ask for the next loss before reading the state, so a loss in between is not missed.
        lost = session.connection_lost()
        if session.connected:
            await runner.set_ready(condition, True)
            await lost
        else:
            lost.cancel()
            await runner.set_ready(condition, False)
            await session.wait_connected()


def _server_options(config: GrpcServerConfig) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", config.max_message_bytes),
        # Let clients keep idle connections alive with pings every 30 s (see client.py)
        # without being sent GOAWAY for pinging too often.
        ("grpc.http2.min_ping_interval_without_data_ms", 20_000),
        ("grpc.keepalive_permit_without_calls", 1),
        # gRPC sets SO_REUSEPORT by default: a second service on the same port would then
        # share its traffic silently instead of failing to start.
        ("grpc.so_reuseport", 0),
    ]


def _bind(server: aio.Server, config: GrpcServerConfig) -> int:
    address = f"{config.host}:{config.port}"
    try:
        if config.tls is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, _server_credentials(config.tls))
    except RuntimeError as exc:  # grpc's way of saying the bind failed
        raise OSError(f"could not bind the gRPC server to {address}: {exc}") from exc
    if port == 0:
        raise OSError(f"could not bind the gRPC server to {address}")
    return int(port)


def _server_credentials(tls: TlsServerConfig) -> grpc.ServerCredentials:
    client_ca = tls.client_ca_file.read_bytes() if tls.client_ca_file else None
    return grpc.ssl_server_credentials(
        [(tls.key_file.read_bytes(), tls.cert_file.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=tls.require_client_cert,
    )
