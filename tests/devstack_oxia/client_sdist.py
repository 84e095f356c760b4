"""The `oxia` Python client's source release, fetched from PyPI at test time and cached.

The release carries the client (`src/oxia`) and its own tests (`tests/`). Neither is kept in
this repository: the archive is downloaded once into a cache directory outside the checkout,
checked against the sha256 PyPI publishes for it, and unpacked beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tarfile
import time
import urllib.request
from pathlib import Path

VERSION = "0.2.1"
URL = (
    "https://files.pythonhosted.org/packages/9f/f6/"
    "3c1d27466a69e69a953f76192d894644f57fc552744ea1ef723d01863925/oxia-0.2.1.tar.gz"
)
#: From PyPI's simple index (`oxia-0.2.1.tar.gz#sha256=…`).
SHA256 = "77ec10ce4a96e129866feb000d84dc74a32af2e6512c5417c57c5ccdac8022ef"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tombstone" / f"oxia-{VERSION}"


def unpacked() -> Path:
    """The unpacked release (its `src/` and `tests/`), downloading it on first use."""
    root = cache_dir()
    tree = root / f"oxia-{VERSION}"
    if (tree / "tests").is_dir() and (tree / "src" / "oxia").is_dir():
        return tree
    root.mkdir(parents=True, exist_ok=True)
    archive = root / f"oxia-{VERSION}.tar.gz"
    if not archive.exists() or _sha256(archive) != SHA256:
        _download(archive)
    # Per process: two pytest workers may unpack at once; the first rename wins.
    staging = root / f"staging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(staging, filter="data")
    with contextlib.suppress(OSError):
        (staging / f"oxia-{VERSION}").rename(tree)
    shutil.rmtree(staging, ignore_errors=True)
    return tree


def _download(archive: Path, attempts: int = 3) -> None:
    partial = archive.with_suffix(f".{os.getpid()}.part")
    for attempt in range(1, attempts + 1):
        try:
            with urllib.request.urlopen(URL, timeout=60) as response, partial.open("wb") as out:
                shutil.copyfileobj(response, out)
            break
        except OSError:
            # Every test here needs the client: a passing network hiccup must not fail the
            # collection of the whole suite, a lasting outage must.
            if attempt == attempts:
                raise
            time.sleep(2 * attempt)
    digest = _sha256(partial)
    if digest != SHA256:
        partial.unlink()
        raise RuntimeError(f"{URL}: sha256 {digest}, expected {SHA256}")
    partial.replace(archive)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
