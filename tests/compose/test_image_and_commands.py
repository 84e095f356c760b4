"""The image runs the console script as an unprivileged user, and every command the Compose
file runs exists."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib

import pytest

from tests.compose.stack_files import ROOT, TOMBSTONE_SERVICES, compose, dockerfile_stages


def _final_stage() -> dict[str, str]:
    """The last stage's instructions (the last one of each kind wins, as in Docker)."""
    return dict(dockerfile_stages()[-1])


def test_entrypoint_is_the_console_script() -> None:
    """ENTRYPOINT is exactly the `tombstone` console script the package installs."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = json.loads(_final_stage()["ENTRYPOINT"])
    assert (entrypoint, scripts["tombstone"]) == (["tombstone"], "services.cli:main")


def test_runs_as_a_user_other_than_root() -> None:
    """The final stage switches to a named, non-root user."""
    user = _final_stage()["USER"].split(":")[0]
    assert user not in {"root", "0"}
    assert user == "tombstone"


def test_base_images_are_pinned_python_311_slim() -> None:
    """Every stage starts from a pinned python:3.11.<patch>-slim image."""
    bases = {stage[0][1].split()[0] for stage in dockerfile_stages()}
    assert all(re.fullmatch(r"python:3\.11\.\d+-slim(-\w+)?", base) for base in bases), bases
    assert len(dockerfile_stages()) == 2


def test_image_installs_no_development_dependencies() -> None:
    """The build installs the project itself (`.`), never an extra such as `.[dev]`, and the
    runtime stage copies only the virtualenv from the build stage."""
    build, runtime = dockerfile_stages()
    installs = [args for kind, args in build if kind == "RUN" and "pip install" in args]
    copies = [args for kind, args in runtime if kind == "COPY"]
    assert (len(installs), copies) == (1, ["--from=build /opt/tombstone /opt/tombstone"])
    assert re.search(r"pip install (--no-compile )?\.(\s|$)", installs[0]), installs[0]


def test_image_has_the_oxia_client_the_bootstrap_pins() -> None:
    """The services open `oxia://` stores with the `oxia` client, which is installed without
    its declared dependencies (scripts/bootstrap.sh says why): the image installs the same
    release the same way."""
    build, _ = dockerfile_stages()
    installs = " ".join(args for kind, args in build if kind == "RUN" and "pip install" in args)
    pinned = re.search(r"--no-deps oxia==([0-9.]+)", installs)
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert pinned is not None, installs
    assert f"--no-deps oxia=={pinned.group(1)}" in bootstrap


def _tombstone(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("service", TOMBSTONE_SERVICES)
def test_service_command_exists(service: str) -> None:
    """The command the Compose file runs for each service (`<service> serve`) exists:
    `tombstone <service> serve --help` exits 0."""
    command = compose()["services"][service]["command"]
    assert [service, "serve"] == command
    result = _tombstone(*command, "--help")
    assert (result.returncode, "Usage:" in result.stdout) == (0, True), result.stderr


def test_health_command_exists() -> None:
    """`tombstone health --help` exits 0 (the healthcheck's command)."""
    result = _tombstone("health", "--help")
    assert (result.returncode, "--address" in result.stdout) == (0, True), result.stderr
