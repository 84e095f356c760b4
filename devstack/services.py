"""Tombstone's own services as child processes, the way benchmarks, the load test and the
local demo run them: `python -m <module>` from the project root, JSON log lines in a file,
ready once the `service_ready` line names the bound port.

The process itself is a `ChildProcess` (log file, closed stdin, signal then SIGKILL), so every
devstack server and service stops the same way.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from devstack.child import ChildProcess

ROOT = Path(__file__).resolve().parents[1]
READY_EVENT = "service_ready"
DEFAULT_ENV = {
    "TOMBSTONE_LOG_FORMAT": "json",
    "TOMBSTONE_GRPC_PORT": "0",
    "TOMBSTONE_METRICS_PORT": "0",
}
"""JSON lines so readiness can be read from the log; gRPC port 0 so the OS picks a free one;
`/metrics` off unless asked for (its default ports are fixed, and several stacks may run on
one machine)."""
_POLL_SECONDS = 0.1


def signing_envs(key_id: str = "devstack") -> tuple[dict[str, str], dict[str, str]]:
    """(marker, verifier) variables that turn signed intents on with a key made for this run:
    the marker signs every PDLI, the verifier holds only the public key and dead-letters
    unsigned or badly signed PDLIs. The keys travel inline (`base64:`), so no file is left."""
    private = Ed25519PrivateKey.generate()
    seed = base64.b64encode(private.private_bytes_raw()).decode()
    public = base64.b64encode(private.public_key().public_bytes_raw()).decode()
    marker = {"TOMBSTONE_MARKER_SIGNING_KEYS": f"{key_id}=base64:{seed}"}
    verifier = {
        "TOMBSTONE_VERIFIER_TRUSTED_KEYS": f"{key_id}=base64:{public}",
        "TOMBSTONE_VERIFIER_REQUIRE_SIGNED": "true",
    }
    return marker, verifier


class EventNotLogged(RuntimeError):
    """The service exited, or did not log the awaited event in time; the message carries
    the tail of its log."""


class ServiceProcess:
    """One Tombstone service (`python -m <module> <args>`), its output appended to `log`.

    The environment is the caller's without its `TOMBSTONE_*` variables (a developer's
    settings must not leak in), then `DEFAULT_ENV`, then `env`. `prefix` wraps the command
    (a profiler, for example); `stop_signal` is what `stop()` sends unless told otherwise.
    """

    def __init__(
        self,
        module: str,
        log: Path,
        *,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        prefix: Sequence[str] = (),
        stop_signal: signal.Signals = signal.SIGTERM,
        stop_timeout: float = 20.0,
        ready_timeout: float = 60.0,
    ) -> None:
        self.module = module
        self.log = log
        self.env = dict(env or {})
        self.args = tuple(args)
        self.prefix = tuple(prefix)
        self.stop_signal = stop_signal
        self.stop_timeout = stop_timeout
        self.ready_timeout = ready_timeout
        self.restarts = 0
        """How many times `restart()` ran."""
        self.returncode: int | None = None
        """Exit code of the last run, once `stop()` has reaped it."""
        self._child = ChildProcess(log)
        self._port: int | None = None
        self._run_offset = 0
        """Where this run's output starts in the log: earlier runs' lines do not count."""

    @property
    def port(self) -> int:
        """The port from the last `service_ready` line."""
        if self._port is None:
            raise RuntimeError(f"{self.module} has not logged {READY_EVENT} yet")
        return self._port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._child.running

    @property
    def pid(self) -> int | None:
        """The spawned process (the prefix's, when there is one)."""
        return self._child.pid

    def command(self) -> list[str]:
        return [*self.prefix, sys.executable, "-m", self.module, *self.args]

    def environment(self) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("TOMBSTONE_")}
        return {**inherited, **DEFAULT_ENV, **self.env}

    async def start(self, timeout: float | None = None) -> dict[str, Any]:
        """Spawn the process and wait for its `service_ready` record, which this returns.

        Raises `EventNotLogged` if the process exits first or `timeout` (default
        `ready_timeout`) passes; the process is killed then, so nothing is left running.
        """
        if self.running:
            raise RuntimeError(f"{self.module} is already running (pid {self.pid})")
        self._run_offset = self.log.stat().st_size if self.log.exists() else 0
        self.returncode = None
        self._child.spawn(self.command(), env=self.environment(), cwd=ROOT)
        try:
            ready = await self.wait_for(
                READY_EVENT, self.ready_timeout if timeout is None else timeout
            )
        except BaseException:
            self._child.kill()
            raise
        self._port = int(ready["port"])
        return ready

    async def wait_for(self, event: str, timeout: float = 60.0) -> dict[str, Any]:
        """The first record of this run whose `event` is `event`, logged before or after
        the call; `EventNotLogged` if the process is gone or `timeout` passes first."""
        deadline = time.monotonic() + timeout
        while True:
            # Whether it exited is read before the log, so a line written just before the
            # exit is still found.
            exited = not self.running
            record = self._find(event)
            if record is not None:
                return record
            if exited:
                raise self._missing(event, f"exited (code {self._exit_code()})")
            if time.monotonic() >= deadline:
                raise self._missing(event, f"still running after {timeout:g}s")
            await asyncio.sleep(_POLL_SECONDS)

    def _find(self, event: str) -> dict[str, Any] | None:
        with self.log.open("rb") as out:
            out.seek(self._run_offset)
            text = out.read().decode(errors="replace")
        needle = json.dumps(event)
        for line in text.splitlines():
            if needle not in line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line from a library, or one cut short by a crash
            if isinstance(record, dict) and record.get("event") == event:
                return record
        return None

    def _exit_code(self) -> int | None:
        code = self._child.exited_with()
        return self.returncode if code is None else code

    def _missing(self, event: str, why: str) -> EventNotLogged:
        tail = self._child.log_tail()
        return EventNotLogged(f"{self.module} {why} without logging {event}; log tail:\n{tail}")

    def peak_rss_mb(self) -> float:
        """Peak resident memory (VmHWM) of the spawned process in MiB; NaN once it is gone."""
        if self.pid is None:
            raise RuntimeError(f"{self.module} is not running")
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except FileNotFoundError:
            return float("nan")
        match = re.search(r"VmHWM:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else float("nan")

    async def stop(
        self, sig: signal.Signals | None = None, timeout: float | None = None
    ) -> int | None:
        """Send `sig` (default `stop_signal`), wait up to `timeout` (default `stop_timeout`),
        then SIGKILL. Returns the exit code: None if never started, the same code again on a
        second call."""
        if self.pid is not None:
            self.returncode = await asyncio.to_thread(
                self._child.stop,
                self.stop_timeout if timeout is None else timeout,
                sig=self.stop_signal if sig is None else sig,
            )
        return self.returncode

    async def restart(self, sig: signal.Signals | None = None) -> dict[str, Any]:
        """Stop (with `sig`, default `stop_signal`), then start again; the new ready record."""
        await self.stop(sig)
        self.restarts += 1
        return await self.start()
