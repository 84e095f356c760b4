"""Free-port and readiness helpers shared by the launchers."""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable


class PortInUse(OSError):
    """The port a server was asked to listen on is already taken by another listener."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} on {host} is already in use")
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return str(self.strerror)


class Interrupted(Exception):
    """A start was given up because a stop was asked for (SIGINT or SIGTERM) meanwhile."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_free(host: str, port: int) -> None:
    """Raise PortInUse when a listener already holds `port`.

    Checked before a server child starts: otherwise the readiness probe would be answered by
    whatever already listens there while the child dies on its failed bind. SO_REUSEADDR
    matches what the servers (Java, werkzeug) set, so connections of a previous run still in
    TIME_WAIT do not count as "in use" and a restart on the same port works.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUse(host, port) from None
            raise


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.1,
    stop: threading.Event | None = None,
) -> None:
    """Poll `check` until it returns True; raise TimeoutError naming `what` otherwise, or
    Interrupted as soon as `stop` is set."""
    deadline = time.monotonic() + timeout
    while True:
        if stop is not None and stop.is_set():
            raise Interrupted(f"{what}: start interrupted")
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f}s")
        time.sleep(interval)
