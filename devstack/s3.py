"""moto's S3 server: a real HTTP S3 endpoint on a free port, for tests and the local stack.

It runs as a child process so a test can stop it (S3 unreachable) and start it again.
moto keeps its state in memory: a stop loses the buckets, which `reset()` also does on purpose.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from devstack.child import ChildProcess
from devstack.ports import ensure_free, free_port, wait_until

# moto accepts any credentials; these are what every client of the local stack uses.
ACCESS_KEY = "tombstone"
SECRET_KEY = "tombstone-secret"
REGION = "us-east-1"


class S3Server:
    def __init__(
        self, *, port: int | None = None, host: str = "127.0.0.1", region: str = REGION
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.region = region
        """The region clients sign for and create buckets in (one server plays one location)."""
        self._child = ChildProcess(Path(tempfile.mkstemp(prefix="tombstone-s3-", suffix=".log")[1]))

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout: float = 30.0, *, stop: threading.Event | None = None) -> None:
        """Start and wait until it answers. PortInUse (before any child starts) when the port
        is taken; on a failed, timed-out or interrupted (`stop` set) start no child is left."""
        if self.running:
            return
        ensure_free(self.host, self.port)
        self._child.spawn(
            [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]
        )
        try:
            wait_until(
                self._ready, timeout=timeout, what=f"S3 server on {self.endpoint}", stop=stop
            )
        except BaseException:
            self._child.stop()
            raise

    def _ready(self) -> bool:
        if self._child.exited_with() is not None:
            raise RuntimeError(f"moto server exited: {self._child.log_tail()}")
        with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1) as resp:
            answered = bool(resp.status == 200)
        # Only while our child lives: another listener on the port would answer too.
        return answered and self._child.exited_with() is None

    @property
    def running(self) -> bool:
        return self._child.running

    @property
    def pid(self) -> int | None:
        """The moto server process (benchmarks read its CPU time)."""
        return self._child.pid

    def reset(self) -> None:
        """Drop every bucket and object (moto's reset API)."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(req, timeout=5):
            pass

    def stop(self) -> None:
        self._child.stop()

    def close(self) -> None:
        self.stop()
        self._child.log_path.unlink(missing_ok=True)

    def client_config(self) -> dict[str, str]:
        """Keyword arguments for aiobotocore's / boto3's create_client('s3', ...)."""
        return {
            "endpoint_url": self.endpoint,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
            "region_name": self.region,
        }

    def service_env(self, *, allowed_buckets: Iterable[str] = ()) -> dict[str, str]:
        """The `TOMBSTONE_S3_*` variables that point a Tombstone service at this server."""
        env = {
            "TOMBSTONE_S3_ENDPOINT_URL": self.endpoint,
            "TOMBSTONE_S3_REGION": self.region,
            "TOMBSTONE_S3_ACCESS_KEY_ID": ACCESS_KEY,
            "TOMBSTONE_S3_SECRET_ACCESS_KEY": SECRET_KEY,
        }
        if buckets := ",".join(allowed_buckets):
            env["TOMBSTONE_S3_ALLOWED_BUCKETS"] = buckets
        return env

    def __enter__(self) -> S3Server:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True)
class S3Locations:
    """The S3 servers a devstack cluster offloads to: the cluster's own location, and the
    buckets that some namespaces' offload policies put at another endpoint and region
    (`elsewhere`: bucket -> its server). Used where one `S3Server` was, it answers as the
    primary one, with the other locations added where a client or a service needs them."""

    primary: S3Server
    elsewhere: Mapping[str, S3Server] = field(default_factory=dict)

    @property
    def endpoint(self) -> str:
        return self.primary.endpoint

    def client_config(self) -> dict[str, str]:
        return self.primary.client_config()

    def routes(self) -> dict[str, dict[str, str]]:
        """Client settings of each bucket held elsewhere (`open_object_stores`)."""
        return {bucket: server.client_config() for bucket, server in self.elsewhere.items()}

    def service_env(self, *, allowed_buckets: Iterable[str] = ()) -> dict[str, str]:
        """The primary's variables, and the other endpoints allowed (an offload record names
        its own endpoint and region; the credentials are the same)."""
        env = self.primary.service_env(allowed_buckets=allowed_buckets)
        if self.elsewhere:
            endpoints = sorted({server.endpoint for server in self.elsewhere.values()})
            env["TOMBSTONE_S3_ALLOWED_ENDPOINTS"] = ",".join(endpoints)
        return env

    def reconcile_locations(self) -> tuple[tuple[str, str, str], ...]:
        """(bucket, endpoint, region) of each bucket held elsewhere (`--s3-location`)."""
        return tuple(
            (bucket, server.endpoint, server.region)
            for bucket, server in sorted(self.elsewhere.items())
        )
