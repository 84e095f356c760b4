"""A Spark standalone cluster on loopback from the installed pyspark package: one master and
`workers` workers, each its own JVM started with `spark-class`, for running the reconciler
with `spark-submit --master spark://127.0.0.1:<port>`.

    with SparkStandalone(tmp_dir, workers=2) as cluster:
        subprocess.run(["spark-submit", "--master", cluster.master_url, "app.py"],
                       env=cluster.env())

Every process binds 127.0.0.1 only, keeps its logs and work directories under `base`, and is
stopped (SIGTERM, then SIGKILL) on exit; a worker's executors exit with it.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import pyspark

from devstack.child import ChildProcess
from devstack.ports import free_port, wait_until

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
#: A short-lived JVM starts faster with the quick JIT tier and the serial collector, and
#: without verifying the bytecode of Spark's own jars as it loads them (thousands of classes;
#: about 15% of a driver's start-up CPU). The JDK's classes are never verified anyway.
QUICK_JVM = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
    "-XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
)


def spark_home() -> Path:
    """The pip-installed pyspark package is a Spark distribution (bin/, jars/)."""
    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    def __init__(
        self,
        base: Path,
        *,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        daemon_memory: str = "256m",
        start_timeout: float = 90.0,
    ) -> None:
        self.base = base
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.port = 0
        self.webui_port = 0
        self._children: list[ChildProcess] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of every Spark process (daemons and spark-submit)."""
        conf = self.base / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            # An empty configuration directory: no spark-defaults.conf of the machine applies.
            "SPARK_CONF_DIR": str(conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.base / "logs"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,
            **extra,
        }

    def start(self) -> SparkStandalone:
        self.base.mkdir(parents=True, exist_ok=True)
        self.port, self.webui_port = free_port(), free_port()
        self._spawn(
            "master",
            [
                MASTER_CLASS,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.webui_port),
            ],
        )
        for i in range(self.workers):
            work_dir = self.base / f"worker-{i}"
            work_dir.mkdir(exist_ok=True)
            self._spawn(
                f"worker-{i}",
                [
                    WORKER_CLASS,
                    *("--host", "127.0.0.1", "--port", str(free_port())),
                    *("--webui-port", str(free_port()), "--cores", str(self.worker_cores)),
                    *("--memory", self.worker_memory, "--work-dir", str(work_dir)),
                    self.master_url,
                ],
            )
        wait_until(
            lambda: self._alive_workers() == self.workers,
            timeout=self.start_timeout,
            what=f"Spark master with {self.workers} workers ({self._logs()})",
            interval=0.5,
        )
        return self

    def _spawn(self, name: str, args: list[str]) -> None:
        child = ChildProcess(self.base / f"{name}.log")
        self._children.append(child)
        child.spawn([str(spark_home() / "bin" / "spark-class"), *args], env=self.env())

    def state(self) -> dict[str, Any]:
        """The master's status document (its web UI's `/json/`): workers, applications."""
        url = f"http://127.0.0.1:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as response:
            doc: dict[str, Any] = json.load(response)
        return doc

    def _alive_workers(self) -> int:
        for child in self._children:
            if not child.running:
                raise RuntimeError(f"a Spark daemon exited: {child.log_tail()}")
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def _logs(self) -> str:
        return ", ".join(str(c.log_path) for c in self._children)

    def stop(self) -> None:
        # Workers first (each stops its executors), then the master.
        for child in reversed(self._children):
            child.stop(timeout=15.0)
        self._children.clear()

    def __enter__(self) -> SparkStandalone:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
