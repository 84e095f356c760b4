"""What the Spark benchmarks' smoke runs give Spark: a driver for a few hundred rows.

A smoke run proves the benchmark still runs and its work still happens; its figures mean
nothing. One core, one partition and no adaptive re-planning are what the suite's own
in-process session uses for inputs this small (tests/scan/conftest.py), and a JVM that lives
seconds starts faster on the quick JIT tier and the serial collector. The measured runs keep
the reconciler's local defaults (`services.scan.spark.LOCAL_DEFAULTS`) and their own master.
"""

from __future__ import annotations

SMOKE_MASTER = "local[1]"

SMOKE_OVERRIDES: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
