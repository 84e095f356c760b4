"""Session-wide real servers: ZooKeeper (Debian's package), moto's S3 server, the devstack broker.

Both start once per test session on free ports and run in every default test run. Tests that
need a clean tree use the function-scoped fixtures, which wipe state before each test.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiozk
import pytest

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer

#: `store_kind`: the tests chosen to run on both metadata stores take it.
pytest_plugins = ["tests.store_kinds"]

#: The files that take longest (CI, seconds of wall time each), longest first. `make test`
#: runs the suite on pytest-xdist workers that take whole files in collection order, so
#: these are collected first: started last, a three-minute file would leave one worker
#: running it alone at the end of the run. Order only; nothing here is skipped or run twice.
SLOWEST_FIRST = (
    "tests/devstack_sim/test_cli.py",
    "tests/test_bench_smoke.py",
    "tests/scan/test_run_cli.py",
    "tests/scan/test_spark_cluster.py",
    "tests/scan/test_shared_bookkeeper.py",
    "tests/deleter_e2e/test_outage.py",
    "tests/chaos/test_short_campaign.py",
    "tests/fuzz/test_fuzz.py",
    "tests/model/test_model.py",
    "tests/devstack_sim/test_simulate_reconcile.py",
    "tests/model/test_oxia_model.py",
    "tests/devstack_demo/test_demo_oxia.py",
    "tests/scan/test_shared_bucket.py",
    "tests/scan/test_cli_extract.py",
    "tests/scan/test_submit_props_e2e.py",
    "tests/devstack_oxia/test_client_suite.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Move the files in SLOWEST_FIRST to the front, in that order (stable otherwise)."""
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    root = config.rootpath

    def key(item: pytest.Item) -> int:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        return rank.get(path, len(rank))

    items.sort(key=key)


#: Spark's defaults for the reconcilers the tests start in child processes (the CLI, the demo's
#: runs): a quick-starting driver JVM, as the in-process session of tests/scan/conftest.py has.
SPARK_CONF_DIR = Path(__file__).resolve().parent / "spark_conf"


@pytest.fixture(autouse=True, scope="session")
def _quick_child_spark() -> Iterator[None]:
    """Every child process started from the tests inherits SPARK_CONF_DIR: its Spark reads
    tests/spark_conf/spark-defaults.conf (never the machine's). The file's keys win over the
    reconciler's built-in local defaults, as an operator's would (services/scan/spark.py);
    none of them changes what a run computes, only how many tasks and jobs it takes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_CONF_DIR", str(SPARK_CONF_DIR))
        yield


@pytest.fixture(autouse=True)
def _isolate_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's AWS and Tombstone settings out of the tests."""
    for name in list(os.environ):
        if name.startswith(("AWS_", "TOMBSTONE_")):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


async def _wipe(client: aiozk.ZKClient, path: str) -> None:
    for child in await client.get_children(path):
        if path == "/" and child == "zookeeper":
            continue
        child_path = f"{path.rstrip('/')}/{child}"
        await _wipe(client, child_path)
        with contextlib.suppress(aiozk.exc.NoNode):
            await client.delete(child_path)


@pytest.fixture
async def zk(zookeeper: ZooKeeperServer) -> AsyncIterator[ZooKeeperServer]:
    """The session ZooKeeper, restarted if a test stopped it, with an empty tree."""
    if not zookeeper.running:
        zookeeper.resume()
        zookeeper.start()
    client = aiozk.ZKClient(zookeeper.address)
    await client.start()
    try:
        await _wipe(client, "/")
    finally:
        await client.close()
    yield zookeeper
    zookeeper.resume()


@pytest.fixture
def s3(s3_server: S3Server) -> S3Server:
    """The session S3 server, restarted if a test stopped it, with no buckets."""
    if not s3_server.running:
        s3_server.start()
    s3_server.reset()
    return s3_server


@pytest.fixture(scope="session")
def s3_server_2() -> Iterator[S3Server]:
    """A second moto server (another endpoint), started only for the tests that use it."""
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_2(s3_server_2: S3Server) -> S3Server:
    """The second S3 server, restarted if a test stopped it, with no buckets."""
    if not s3_server_2.running:
        s3_server_2.start()
    s3_server_2.reset()
    return s3_server_2


@pytest.fixture(scope="session")
def pulsar_broker() -> Iterator[PulsarBrokerProcess]:
    """The devstack Pulsar broker (in memory) in a child process on free ports, for the session."""
    with PulsarBrokerProcess() as server:
        yield server


@pytest.fixture
def broker(pulsar_broker: PulsarBrokerProcess) -> PulsarBrokerProcess:
    """The session broker, restarted if a test stopped it, with no topics and no faults."""
    if not pulsar_broker.running:
        pulsar_broker.start()
    pulsar_broker.control.reset()
    return pulsar_broker
