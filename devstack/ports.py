"""Free-port and readiness helpers shared by the launchers."""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path


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


#: Every process on this machine that hands out ports through `free_port` locks one byte per
#: port in this file (POSIX record locks, released when the process exits), so two test
#: workers, or two engineers' runs, never hand out the same port.
_RESERVATIONS = Path(tempfile.gettempdir()) / "tombstone-ports.lock"
#: The lowest port handed out; the highest is just below the kernel's ephemeral range.
_LOWEST = 15_000
_reservations_fd: int | None = None
_handed_out: set[int] = set()
_lock = threading.Lock()


def _ephemeral_low() -> int:
    """The first port the kernel hands to bind(0) and to outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _reserve(port: int) -> bool:
    """Take this process's lock on `port`; False when another process holds it."""
    global _reservations_fd
    if _reservations_fd is None:
        _reservations_fd = os.open(_RESERVATIONS, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(_reservations_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:
        return False
    return True


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that nothing listens on and that no other caller will be given.

    A port the OS picks (bind to 0, then close) can be picked again by another process, or
    taken as the local end of an outgoing connection, before the server that was meant to
    listen there binds it: Java servers take seconds to get there, and parallel test workers
    hit that race. So the port comes from below the kernel's ephemeral range, which neither
    bind(0) nor connect() ever uses, and is reserved for the life of this process with a lock
    every other `free_port` caller respects. It is never handed out twice by one process.
    """
    with _lock:
        high = _ephemeral_low()
        if high - _LOWEST < 1_000:
            return _os_port(host)
        span = high - _LOWEST
        start = random.randrange(span)
        for offset in range(span):
            port = _LOWEST + (start + offset) % span
            if port in _handed_out or not _reserve(port):
                continue
            _handed_out.add(port)
            if _bindable(host, port):
                return port
        return _os_port(host)


def _os_port(host: str) -> int:
    """The OS's pick, when the kernel leaves no room below its ephemeral range."""
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
