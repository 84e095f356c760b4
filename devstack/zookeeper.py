"""A real ZooKeeper server from Debian's `zookeeper` package, on a free port.

Used by the tests and the local stack. The server runs as a child process with its own data
directory, so it can be stopped, killed, paused (to expire sessions) and restarted on the same
port with its data intact: the failure tests need all four.
"""

from __future__ import annotations

import shutil
import signal
import socket
import tempfile
import threading
from pathlib import Path
from types import TracebackType

from devstack.child import ChildProcess
from devstack.ports import ensure_free, free_port, wait_until
from services.metadata.acl import digest_id

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ('' on no answer)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server. Use as a context manager or call start()/stop()."""

    def __init__(
        self,
        *,
        port: int | None = None,
        data_dir: Path | None = None,
        host: str = "127.0.0.1",
        tick_ms: int = 500,
        max_session_timeout_ms: int = 60_000,
        super_password: str | None = None,
    ) -> None:
        """`super_password`: the password of ZooKeeper's `super` digest user (who passes
        every ACL), for servers whose znodes carry ACLs; None: no super user."""
        if not ZOOKEEPER_JAR.exists():
            raise FileNotFoundError(
                f"{ZOOKEEPER_JAR} is missing: install Debian's zookeeper package "
                "(scripts/bootstrap.sh does)"
            )
        self.host = host
        self.port = port or free_port(host)
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="tombstone-zk-"))
        # A short tick lets tests expire sessions in seconds (minimum session = 2 ticks).
        self.tick_ms = tick_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.super_password = super_password
        self._child = ChildProcess(self.data_dir / "stdout.log")

    @property
    def address(self) -> str:
        """host:port, the form aiozk and Pulsar's metadataStoreUrl take."""
        return f"{self.host}:{self.port}"

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={self.data_dir / 'data'}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,mntr,stat",
                    "",
                ]
            )
        )
        (self.data_dir / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.data_dir / 'zookeeper.log'}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
        )
        return cfg

    def start(self, timeout: float = 30.0, *, stop: threading.Event | None = None) -> None:
        """Start and wait until the server serves requests.

        Raises PortInUse (before any child starts) when the port is taken, RuntimeError when
        the child exits, TimeoutError, or `ports.Interrupted` as soon as `stop` is set; in
        every case no child is left running.
        """
        if self.running:
            return
        ensure_free(self.host, self.port)
        cfg = self._write_config()
        cmd = [
            shutil.which("java") or "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            # Pulsar creates CONTAINER parents; reap empty ones within a second, not a minute.
            # The server reads this only as a system property, not from zoo.cfg.
            "-Dznode.container.checkIntervalMs=1000",
            *self._super_digest(),
            "-cp",
            f"{self.data_dir}:{ZOOKEEPER_JAR}",
            MAIN_CLASS,
            str(cfg),
        ]
        self._child.spawn(cmd)
        try:
            wait_until(self._ready, timeout=timeout, what=f"ZooKeeper on {self.address}", stop=stop)
        except BaseException:
            self._child.stop(timeout=15)
            raise

    def _super_digest(self) -> list[str]:
        if self.super_password is None:
            return []
        digest = digest_id("super", self.super_password)
        return [f"-Dzookeeper.DigestAuthenticationProvider.superDigest={digest}"]

    def _ready(self) -> bool:
        code = self._child.exited_with()
        if code is not None:
            raise RuntimeError(f"ZooKeeper exited with {code}: {self._child.log_tail()}")
        # `ruok` answers before the server serves requests; `srvr` reports the mode once it does.
        # The answer counts only while our child is alive: a listener that took the port
        # after the free-port check would answer too, while the child died on its bind.
        serving = "Mode: standalone" in four_letter_word(self.host, self.port, "srvr")
        return serving and self._child.exited_with() is None

    @property
    def running(self) -> bool:
        return self._child.running

    def stop(self) -> None:
        """Stop cleanly (SIGTERM). Data stays for a restart."""
        self._child.stop(timeout=15)

    def kill(self) -> None:
        """Crash the server (SIGKILL), as a power loss would."""
        self._child.kill()

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): clients time out and sessions expire. Returns once
        every server thread has stopped, so no request sent afterwards is answered."""
        self._child.send_signal(signal.SIGSTOP)
        self._child.wait_all_threads_stopped()

    def resume(self) -> None:
        self._child.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        """Stop and remove the data directory if this object created it."""
        self.resume()
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
