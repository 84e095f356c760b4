"""The reconciler's local Spark settings give way to the operator's spark-defaults.conf."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.spark_cluster import QUICK_JVM
from services.scan.spark import LOCAL_DEFAULTS, _local_defaults, defaults_file, defaults_file_keys


def test_defaults_file_is_in_spark_conf_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_CONF_DIR", "/etc/spark")
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert defaults_file() == Path("/etc/spark/spark-defaults.conf")


def test_defaults_file_is_in_spark_home_without_a_conf_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.setenv("SPARK_HOME", "/opt/spark")
    assert defaults_file() == Path("/opt/spark/conf/spark-defaults.conf")


def test_defaults_file_is_in_the_pyspark_package_without_a_home(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyspark

    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    assert defaults_file() == Path(pyspark.__file__).parent / "conf" / "spark-defaults.conf"


def test_keys_are_read_as_a_java_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "spark-defaults.conf"
    path.write_text(
        "# a comment\n"
        "! another comment\n"
        "\n"
        "spark.sql.shuffle.partitions   1\n"
        "  spark.driver.memory=2g\n"
        "spark.sql.adaptive.enabled:false\n"
        "spark.ui.enabled\tfalse\n"
    )
    assert defaults_file_keys(path) == {
        "spark.sql.shuffle.partitions",
        "spark.driver.memory",
        "spark.sql.adaptive.enabled",
        "spark.ui.enabled",
    }


def test_an_absent_file_sets_nothing(tmp_path: Path) -> None:
    assert defaults_file_keys(tmp_path / "spark-defaults.conf") == set()


def test_the_operators_keys_are_left_out_of_the_local_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.sql.shuffle.partitions 3\nspark.executor.cores 1\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    settings = _local_defaults()
    assert "spark.sql.shuffle.partitions" not in settings
    # Every other built-in default stays, with its value; keys the reconciler does not set
    # are Spark's business alone.
    assert settings == {
        k: v for k, v in LOCAL_DEFAULTS.items() if k != "spark.sql.shuffle.partitions"
    }


_SESSION_SETTINGS = """
from services.scan.spark import build_session
spark = build_session("local[1]", overrides={"spark.driver.memory": "1g"})
print(spark.conf.get("spark.sql.shuffle.partitions"), spark.conf.get("spark.sql.session.timeZone"))
spark.stop()
"""


@pytest.mark.timeout(300)
def test_a_local_session_takes_the_operators_value_over_the_built_in_one(tmp_path: Path) -> None:
    """A new driver JVM (in a child process: this one's session exists already) with a
    spark-defaults.conf setting one of LOCAL_DEFAULTS' keys: the session has the file's
    value for it, and the built-in value for a key the file leaves open."""
    (tmp_path / "spark-defaults.conf").write_text(
        f"spark.driver.extraJavaOptions {QUICK_JVM}\nspark.sql.shuffle.partitions 3\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "SPARK_CONF_DIR": str(tmp_path), "PYTHONPATH": str(root)}
    result = subprocess.run(
        [sys.executable, "-c", _SESSION_SETTINGS],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["3", "UTC"], result.stdout
