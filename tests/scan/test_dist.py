"""The spark-submit package: the zip holds the project's packages and the driver script runs
the CLI from the zip alone (no worktree on the path)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from scripts.dist_spark import MAIN_NAME, ZIP_NAME, build


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    archive = tmp_path / ZIP_NAME
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(archive)}
    return subprocess.run(
        [sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


def test_zip_contains_the_reconciler_and_generated_code(tmp_path: Path) -> None:
    """The extract, analysis, submit and CLI modules and the generated protos are in the zip."""
    archive, main = build(tmp_path)
    names = set(zipfile.ZipFile(archive).namelist())
    wanted = {
        "services/cli.py",
        "services/scan/extract/job.py",
        "services/scan/submit/send.py",
        "services/metadata/zookeeper/store.py",
        "services/metadata/oxia/store.py",
        "tombstone/v1/marker_pb2.py",
    }
    assert (wanted <= names, main.name) == (True, MAIN_NAME)


def test_modules_import_from_the_zip(tmp_path: Path) -> None:
    """With only the zip on PYTHONPATH, the reconciler modules load from inside it."""
    build(tmp_path)
    code = "import services.scan.extract.units as m, services.cli; print(m.__file__)"
    result = _run(tmp_path, "-c", code)
    assert (result.returncode, ZIP_NAME in result.stdout) == (0, True), result.stderr


def test_driver_script_runs_the_cli(tmp_path: Path) -> None:
    """`python tombstone_reconcile.py reconcile --help` lists extract, analyze and run."""
    _, main = build(tmp_path)
    result = _run(tmp_path, str(main), "reconcile", "--help")
    listed = [name in result.stdout for name in ("extract", "analyze", "run")]
    assert (result.returncode, listed) == (0, [True, True, True]), result.stderr
