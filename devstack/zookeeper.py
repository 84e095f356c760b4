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
from devstack.zk_tls import TlsFiles, make_tls_files
from services.metadata.acl import digest_id

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
JAVA_DIR = Path("/usr/share/java")
NETTY_TLS_PARTS = ("codec", "resolver", "handler", "transport", "common", "buffer")


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
        tls: bool = False,
        tombstone_identity: tuple[str, str] | None = None,
    ) -> None:
        """`super_password`: the password of ZooKeeper's `super` digest user (who passes
        every ACL), for servers whose znodes carry ACLs; None: no super user. `tls`: also
        serve a TLS port (`secure_port`, client certificates required) with fresh
        certificates in `tls_files`. `tombstone_identity`: the digest (user, password) the
        services get from `service_env()`."""
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
        self.tombstone_identity = tombstone_identity
        self.secure_port = free_port(host) if tls else None
        self.tls_files: TlsFiles | None = None
        self._child = ChildProcess(self.data_dir / "stdout.log")

    @property
    def address(self) -> str:
        """host:port, the form aiozk and Pulsar's metadataStoreUrl take."""
        return f"{self.host}:{self.port}"

    def service_env(self) -> dict[str, str]:
        """The `TOMBSTONE_ZOOKEEPER_*` settings of a service using this server: its address,
        and the digest identity when the server was given one."""
        env = {"TOMBSTONE_ZOOKEEPER_SERVERS": self.address}
        if self.tombstone_identity is not None:
            user, password = self.tombstone_identity
            env["TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_USER"] = user
            env["TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD"] = password
        return env

    @property
    def secure_address(self) -> str:
        """host:port of the TLS port (a server started with `tls=True`)."""
        if self.secure_port is None:
            raise RuntimeError("this server has no TLS port")
        return f"{self.host}:{self.secure_port}"

    def _tls_config(self) -> list[str]:
        if self.secure_port is None:
            return []
        if self.tls_files is None:
            self.tls_files = make_tls_files(self.data_dir / "tls", self.host)
        files = self.tls_files
        return [
            f"secureClientPort={self.secure_port}",
            f"secureClientPortAddress={self.host}",
            # Only Netty's connection factory speaks TLS.
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={files.server}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={files.ca}",
            "ssl.trustStore.type=PEM",
            "ssl.clientAuth=need",
            # The client certificate names no host; the server checks only its signature.
            "ssl.hostnameVerification=false",
        ]

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        cfg.write_text(
            "\n".join(
                [
                    *self._tls_config(),
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
            ":".join([str(self.data_dir), str(ZOOKEEPER_JAR), *self._netty_jars()]),
            MAIN_CLASS,
            str(cfg),
        ]
        self._child.spawn(cmd)
        try:
            wait_until(self._ready, timeout=timeout, what=f"ZooKeeper on {self.address}", stop=stop)
        except BaseException:
            self._child.stop(timeout=15)
            raise

    def _netty_jars(self) -> list[str]:
        """The jar's manifest names netty-handler but not what it needs for TLS."""
        if self.secure_port is None:
            return []
        return [str(JAVA_DIR / f"netty-{part}.jar") for part in NETTY_TLS_PARTS]

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
