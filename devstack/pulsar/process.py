"""Launchers: the broker as a child process (`PulsarBrokerProcess`) or on a thread (`BrokerThread`).

The sync `pulsar-client` blocks its calling thread, so a test must never share an event loop
with the broker it talks to; both launchers keep the broker off the test's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType

from devstack.ports import free_port, wait_until

from .broker import BrokerConfig
from .control import BrokerControl
from .server import BrokerServer


class _Endpoints:
    host: str
    port: int
    admin_port: int

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    @property
    def control(self) -> BrokerControl:
        return BrokerControl(self.admin_url)


class PulsarBrokerProcess(_Endpoints):
    """`python -m devstack.pulsar` on free ports; restarts keep the ports and the data dir."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        admin_port: int | None = None,
        data_dir: Path | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.admin_port = admin_port or free_port(host)
        self.data_dir = data_dir
        self.extra_args = extra_args
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = Path(tempfile.mkstemp(prefix="tombstone-broker-", suffix=".log")[1])

    def _command(self) -> list[str]:
        cmd = [sys.executable, "-m", "devstack.pulsar", "--host", self.host]
        cmd += ["--port", str(self.port), "--admin-port", str(self.admin_port)]
        if self.data_dir is not None:
            cmd += ["--data-dir", str(self.data_dir)]
        return cmd + list(self.extra_args)

    def start(self, timeout: float = 30.0) -> None:
        if self.running:
            return
        out = open(self._log, "ab")  # noqa: SIM115 - owned by the child
        self._proc = subprocess.Popen(
            self._command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        out.close()
        wait_until(self._ready, timeout=timeout, what=f"devstack broker on {self.service_url}")

    def _ready(self) -> bool:
        if self._proc is not None and self._proc.poll() is not None:
            raise RuntimeError(f"broker exited: {self.log_text()[-2000:]}")
        with urllib.request.urlopen(f"{self.admin_url}/admin/v2/clusters", timeout=1) as resp:
            return bool(resp.status == 200)

    def log_text(self) -> str:
        return self._log.read_text(errors="replace")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM: the broker closes producers and consumers, saves cursors and exits.

        Returns the exit code (None if the broker was not started).
        """
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        code = self._proc.returncode
        self._proc = None
        return code

    def kill(self) -> None:
        """SIGKILL: a crash; only what reached the files survives."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None

    def restart(self, *, kill: bool = False) -> None:
        """Stop (or kill) and start again on the same ports with the same data directory."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        self._log.unlink(missing_ok=True)

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

    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config or BrokerConfig(port=0, admin_port=0)
        self.host = self.config.host
        self.port = 0
        self.admin_port = 0
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self.server: BrokerServer | None = None

    def start(self, timeout: float = 30.0) -> None:
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.server = BrokerServer(self.config)
        self._run(self.server.start(), timeout)
        self.port, self.admin_port = self.server.port, self.server.admin_port

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
