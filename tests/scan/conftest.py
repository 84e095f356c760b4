"""One local SparkSession for every reconciler test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from services.scan.spark import build_session
from tests.scan.session_settings import TEST_SESSION


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(
        "local[2]",
        app_name="tombstone-scan-tests",
        overrides=TEST_SESSION,
    )
    yield session
    session.stop()
