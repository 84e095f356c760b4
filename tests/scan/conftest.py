"""One local SparkSession for every reconciler test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from devstack.spark_cluster import QUICK_JVM
from services.scan.spark import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(
        "local[2]",
        app_name="tombstone-scan-tests",
        overrides={
            "spark.driver.memory": "2g",
            # Tiny inputs: one shuffle partition per core is plenty.
            "spark.sql.shuffle.partitions": "1",
            "spark.default.parallelism": "1",
            # A short-lived JVM that starts faster (devstack.spark_cluster.QUICK_JVM).
            "spark.driver.extraJavaOptions": QUICK_JVM,
            # Compiling generated code costs more than it saves on a few dozen rows.
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.adaptive.enabled": "false",
        },
    )
    yield session
    session.stop()
