"""The devstack Oxia server for the benchmarks' `--metadata oxia` modes, and the raw client
that is their yardstick.

The server runs as a child process (`python -m devstack.oxia`), not in a thread of the
benchmark: it is Python, and in the benchmark's own interpreter it would share one GIL with
the code measured, so a faster adapter would slow its own server down. As a child it has a
core of its own (of two), as a real Oxia has machines of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from services.core.config import ZooKeeperConfig
from services.core.metadata_stores import MetadataStores
from services.core.shared_clusters import OXIA, StoreUrl
from services.metadata.oxia import _client

NAMESPACE = "default"
STARTUP_TIMEOUT_S = 60.0
T = TypeVar("T")


@contextlib.contextmanager
def oxia_server(shards: int) -> Iterator[str]:
    """A devstack Oxia server in a child process on a free port; yields `host:port`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "devstack.oxia", "--port", "0", "--shards", str(shards)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the readiness line, or "" if it died
        if not line.startswith("READY address="):
            raise RuntimeError(f"the devstack Oxia server did not start: {line!r}")
        yield line.split()[1].removeprefix("address=")
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def store_url(address: str) -> str:
    """Pulsar's URL form of the server's namespace (TOMBSTONE_METADATA_STORE_URL)."""
    return f"oxia://{address}/{NAMESPACE}"


def zookeeper_config(address: str, base: ZooKeeperConfig) -> ZooKeeperConfig:
    """`base`'s timeouts, with Pulsar's and BookKeeper's metadata both on the Oxia server."""
    store = StoreUrl(OXIA, address, NAMESPACE)
    return ZooKeeperConfig(
        session_timeout=base.session_timeout,
        operation_timeout=base.operation_timeout,
        urls=MetadataStores(store, store),
    )


@contextlib.contextmanager
def raw_client(address: str) -> Iterator[Any]:
    """The raw `oxia.Client` (built as the adapter builds its own, so both wait the same
    for shard assignments; nothing else of the adapter is on its calls)."""
    client = _client.open_client(address, NAMESPACE, 30_000, 30.0, lambda _session: None)
    try:
        yield client
    finally:
        client.close()


async def in_threads(items: list[T], threads: int, work: Callable[[T], object]) -> float:
    """`work` over every item from `threads` plain threads (the raw client's own way to have
    calls in flight: it is synchronous); items per second."""

    def go() -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            for _ in pool.map(work, items):
                pass
        return len(items) / (time.perf_counter() - started)

    return await asyncio.to_thread(go)
