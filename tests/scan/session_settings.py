"""The reconciler tests' Spark session settings, shared by tests/scan/conftest.py and
scripts/analysis_jobs.py (which measures an analysis as the tests run it)."""

from __future__ import annotations

from devstack.spark_cluster import QUICK_JVM

TEST_SESSION = {
    "spark.driver.memory": "2g",
    # Tiny inputs: one shuffle partition per core is plenty.
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    # A short-lived JVM that starts faster (devstack.spark_cluster.QUICK_JVM).
    "spark.driver.extraJavaOptions": QUICK_JVM,
    # Compiling generated code costs more than it saves on a few dozen rows.
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
}
