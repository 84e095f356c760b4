"""Launchers: the broker as a child process (`PulsarBrokerProcess`) or on a thread (`BrokerThread`).

The sync `pulsar-client` blocks its calling thread, so a test must never share an event loop
with the broker it talks to; both launchers keep the broker off the test's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType

from devstack.child import ChildProcess
from devstack.ports import free_port, wait_until

from .broker import BrokerConfig
from .control import BrokerControl
from .security import BrokerSecurity, SecureFiles
from .server import BrokerServer

OAUTH2_AUDIENCE = "urn:tombstone:devstack-pulsar"
"""The audience the devstack's clients ask the issuer for."""


class _Endpoints:
    host: str
    port: int
    admin_port: int
    issuer_port: int | None = None
    secure: SecureFiles | None = None
    """The CA, keys, token and credentials of a secured broker (TLS and authentication)."""

    @property
    def service_url(self) -> str:
        scheme = "pulsar+ssl" if self.secure else "pulsar"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{self.host}:{self.admin_port}"

    @property
    def issuer_url(self) -> str | None:
        """The OAuth2 issuer of a secured broker."""
        if self.secure is None or not self.issuer_port:
            return None
        return f"https://{self.host}:{self.issuer_port}"

    def client_ssl_context(self) -> ssl.SSLContext | None:
        if self.secure is None:
            return None
        return ssl.create_default_context(cafile=str(self.secure.ca))

    @property
    def control(self) -> BrokerControl:
        token = self.secure.token.read_text().strip() if self.secure else None
        return BrokerControl(self.admin_url, ssl_context=self.client_ssl_context(), token=token)

    def tombstone_environment(self, auth: str = "oauth2") -> dict[str, str]:
        """The `TOMBSTONE_PULSAR_*` settings that reach this broker: URLs, and for a secured
        one its CA and the credentials of `auth` (`oauth2` or `token`)."""
        env = {
            "TOMBSTONE_PULSAR_SERVICE_URL": self.service_url,
            "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": self.admin_url,
        }
        if self.secure is None:
            return env
        env["TOMBSTONE_PULSAR_TLS_TRUST_CERTS_FILE_PATH"] = str(self.secure.ca)
        if auth == "token":
            env["TOMBSTONE_PULSAR_AUTH_PLUGIN"] = "token"
            env["TOMBSTONE_PULSAR_AUTH_TOKEN_FILE"] = str(self.secure.token)
        elif auth == "oauth2":
            assert self.issuer_url is not None
            env["TOMBSTONE_PULSAR_AUTH_PLUGIN"] = "oauth2"
            env["TOMBSTONE_PULSAR_OAUTH2_ISSUER_URL"] = self.issuer_url
            env["TOMBSTONE_PULSAR_OAUTH2_PRIVATE_KEY"] = str(self.secure.oauth2_credentials)
            env["TOMBSTONE_PULSAR_OAUTH2_AUDIENCE"] = OAUTH2_AUDIENCE
        else:
            raise ValueError(f"unknown authentication {auth!r}")
        return env


class PulsarBrokerProcess(_Endpoints):
    """`python -m devstack.pulsar` on free ports; restarts keep the ports and the data dir."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        admin_port: int | None = None,
        data_dir: Path | None = None,
        secure_dir: Path | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.admin_port = admin_port or free_port(host)
        self.data_dir = data_dir
        if secure_dir is not None:
            # Made here, not by the child, so the files exist before it answers.
            self.secure = SecureFiles.create(secure_dir)
            self.issuer_port = free_port(host)
        self.extra_args = extra_args
        self._child = ChildProcess(
            Path(tempfile.mkstemp(prefix="tombstone-broker-", suffix=".log")[1])
        )

    def _command(self) -> list[str]:
        cmd = [sys.executable, "-m", "devstack.pulsar", "--host", self.host]
        cmd += ["--port", str(self.port), "--admin-port", str(self.admin_port)]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        if self.secure is not None:
            cmd += ["--secure-dir", str(self.secure.directory)]
            cmd += ["--issuer-port", str(self.issuer_port)]
        return cmd + list(self.extra_args)

    def start(self, timeout: float = 30.0) -> None:
        if self.running:
            return
        self._child.spawn(self._command())
        wait_until(self._ready, timeout=timeout, what=f"devstack broker on {self.service_url}")

    def _ready(self) -> bool:
        if self._child.exited_with() is not None:
            raise RuntimeError(f"broker exited: {self._child.log_tail()}")
        url = f"{self.admin_url}/admin/v2/clusters"
        context = self.client_ssl_context()
        if context is not None:
            context.check_hostname = False  # only "is it up": its name may be another host's
        try:
            with urllib.request.urlopen(url, timeout=1, context=context) as resp:
                return bool(resp.status == 200)
        except urllib.error.HTTPError as exc:
            return exc.code == 401  # a secured broker answers: it is up

    def log_text(self) -> str:
        return self._child.log_path.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self._child.running

    @property
    def pid(self) -> int | None:
        return self._child.pid

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM: the broker closes producers and consumers, saves cursors and exits.

        Returns the exit code (None if the broker was not started).
        """
        return self._child.stop(timeout)

    def kill(self) -> None:
        """SIGKILL: a crash; only what reached the files survives."""
        self._child.kill()

    def restart(self, *, kill: bool = False) -> None:
        """Stop (or kill) and start again on the same ports with the same data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        self._child.log_path.unlink(missing_ok=True)

    def __enter__(self) -> PulsarBrokerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BrokerThread(_Endpoints):
    """The broker in this process, on its own thread and event loop."""

    def __init__(
        self, config: BrokerConfig | None = None, *, secure: SecureFiles | None = None
    ) -> None:
        """`secure`: the client-side files of a broker whose `config.security` came from them
        (see `secured`)."""
        self.config = config or BrokerConfig(port=0, admin_port=0)
        self.host = self.config.host
        self.port = 0
        self.admin_port = 0
        self.secure = secure
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self.server: BrokerServer | None = None

    def start(self, timeout: float = 30.0) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.server = BrokerServer(self.config)
        self._run(self.server.start(), timeout)
        self.port, self.admin_port = self.server.port, self.server.admin_port
        self.issuer_port = self.server.issuer_port

    @classmethod
    def secured(
        cls, directory: Path, *, token_lifetime: float = 3600.0, **config: object
    ) -> BrokerThread:
        """A broker with TLS and authentication from the files in `directory` (made if
        absent), running the OAuth2 issuer."""
        files = SecureFiles.create(directory)
        security = BrokerSecurity.from_files(files, token_lifetime=token_lifetime)
        settings: dict[str, object] = {"port": 0, "admin_port": 0, **config}
        return cls(BrokerConfig(security=security, **settings), secure=files)  # type: ignore[arg-type]

    def _run(self, coro: Coroutine[object, object, None], timeout: float) -> None:
        future: Future[None] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        future.result(timeout)

    def restart(self, timeout: float = 30.0) -> None:
        assert self.server is not None
        self._run(self.server.restart_broker(), timeout)

    def stop(self, timeout: float = 30.0) -> None:
        if self.server is not None:
            self._run(self.server.stop(), timeout)
            self.server = None
        if self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            self._thread = None
        with contextlib.suppress(RuntimeError):
            self._loop.close()

    def __enter__(self) -> BrokerThread:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
