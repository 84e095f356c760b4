"""The SparkSession for the reconciler: local by default, any master when asked."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

#: Settings for one 2-core, 24 GB machine in local mode. The driver is the only JVM there,
#: so it gets half the memory; a few shuffle partitions per core keep tasks big enough to be
#: efficient, and adaptive execution coalesces them further and picks broadcast joins.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.driver.memory": "12g",
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    # The owners side of the classification join (one row per topic and schema) is
    # broadcast up to a few million topics rather than shuffling every ledger again.
    "spark.sql.autoBroadcastJoinThreshold": str(256 * 1024 * 1024),
    "spark.sql.adaptive.autoBroadcastJoinThreshold": str(256 * 1024 * 1024),
    # Join ledgers with their references by hashing partitions instead of sorting both
    # sides (each side is one row per ledger id; a partition fits in memory easily).
    "spark.sql.adaptive.maxShuffledHashJoinLocalMapThreshold": str(256 * 1024 * 1024),
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Only loopback: the reconciler in local mode opens no port to the network.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def defaults_file() -> Path:
    """The spark-defaults.conf `spark-submit` reads: in SPARK_CONF_DIR, else in
    SPARK_HOME/conf, SPARK_HOME being the pip-installed `pyspark` package when unset (as
    PySpark's own launcher finds it)."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if conf_dir:
        return Path(conf_dir) / "spark-defaults.conf"
    home = os.environ.get("SPARK_HOME")
    if not home:
        import pyspark

        home = str(Path(pyspark.__file__).parent)
    return Path(home) / "conf" / "spark-defaults.conf"


def defaults_file_keys(path: Path) -> set[str]:
    """The keys `path` sets, read as Spark reads it (a Java properties file: a key ends at
    the first whitespace, `=` or `:`; lines starting with `#` or `!` are comments). An
    absent file sets nothing."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return set()
    keys = set()
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        keys.add(re.split(r"[\s=:]", line, maxsplit=1)[0])
    return keys


def _local_defaults() -> dict[str, str]:
    """LOCAL_DEFAULTS without the keys the operator's spark-defaults.conf sets. Settings
    given to Spark explicitly win over that file, so leaving a key out is what lets the
    file's value apply."""
    operator = defaults_file_keys(defaults_file())
    return {key: value for key, value in LOCAL_DEFAULTS.items() if key not in operator}


@contextlib.contextmanager
def _jvm_output_to(log_path: Path | None) -> Iterator[None]:
    """While entered, file descriptors 1 and 2 point at `log_path` (appended).

    The JVM that PySpark starts inherits them for its whole life, and so do the Python
    workers it forks: Spark's log4j lines, JVM warnings and the workers' library messages go
    to the file instead of the operator's terminal. This process's own streams are restored
    on exit; Python exceptions still carry the JVM's error text.
    """
    if log_path is None:
        yield
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for descriptor in (fd, *saved):
            os.close(descriptor)


def _launch_detached_gateway(master: str | None, app_name: str, settings: dict[str, str]) -> None:
    """Start the driver JVM in its own session, with the settings the builder would pass.

    A terminal's Ctrl-C goes to its whole foreground process group: the JVM ignores it, but
    the Python workers it forks would each die with a stack trace. In a session of its own,
    the JVM and its workers never see it; the command stops Spark itself (`cli.run_guard`). The
    JVM still exits when this process does (it watches its stdin pipe). Nothing to do when a
    gateway exists already (a second session, or under `spark-submit`)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False).setAppName(app_name)
    if master is not None:
        conf.setMaster(master)
    conf.setAll(list(settings.items()))
    gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})  # type: ignore[no-untyped-call]
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def build_session(
    master: str | None = "local[*]",
    *,
    app_name: str = "tombstone-reconcile",
    overrides: dict[str, str] | None = None,
    jvm_log: Path | None = None,
) -> SparkSession:
    """A session for `master`; local masters get LOCAL_DEFAULTS, except for the keys the
    operator's spark-defaults.conf sets (`defaults_file`): the operator's file wins over the
    reconciler's built-in choices, as it does for any Spark application.

    `master=None` takes the master and settings `spark-submit` was given (a cluster run);
    only `overrides` are applied then. With `jvm_log`, a JVM this call starts writes its
    output there (a JVM already running, as under `spark-submit`, keeps its own).
    """
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = _local_defaults() if master and master.startswith("local") else {}
    if settings:
        # Python workers (the extract's tasks) run this interpreter, with the project's
        # dependencies, rather than whatever `python3` is first on the PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(overrides or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    if settings:
        # The driver binds to loopback anyway; saying so spares the hostname warning.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The JVM (started detached, in its own session) inherits descriptors pointing at the log.
    with _jvm_output_to(jvm_log):
        _launch_detached_gateway(master, app_name, settings)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
