"""Headless Chromium (Debian's `chromium`, installed by scripts/bootstrap.sh) for report tests.

Each call starts its own browser with a fresh profile, nothing fetched from the network
(no component updates, sync, QUIC or background requests), and waits for it to exit.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

TIMEOUT_S = 120


def binary() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found is not None, "chromium is missing: run scripts/bootstrap.sh (Debian chromium)"
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        command = [
            binary(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            *args,
        ]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def dump_dom(page: Path) -> str:
    """The DOM Chromium built from `page`, serialised."""
    return _run("--dump-dom", page.resolve().as_uri()).stdout


def screenshot(page: Path, out: Path, *, width: int = 1100, height: int = 4200) -> None:
    _run(
        f"--screenshot={out.resolve()}",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
        page.resolve().as_uri(),
    )
