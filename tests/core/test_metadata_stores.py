"""Where Pulsar's and BookKeeper's metadata are: `TOMBSTONE_METADATA_STORE_URL` and
`TOMBSTONE_BOOKKEEPER_METADATA_URL`, their defaults, forms and conflicts, and the sessions
`connect_store` / `open_stores` open from them (real ZooKeeper)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from devstack.oxia import OxiaServer, running_in_thread
from devstack.zookeeper import ZooKeeperServer
from services.core.config import MetadataStores, ZooKeeperConfig
from services.core.errors import ConfigError
from services.core.metadata_stores import parse_bookkeeper_url
from services.core.shared_clusters import OXIA, ZOOKEEPER, StoreUrl
from services.metadata.connect import connect_store, open_stores
from services.metadata.errors import StoreUnavailable
from services.metadata.migration import MigrationPhase
from services.metadata.migration.guard import guarded_write_refusal
from services.metadata.oxia.store import OxiaMetadataStore
from services.metadata.zookeeper import ZkMetadataStore
from tests.metadata.pulsar_migration import PulsarMigrationCoordinator

URL = "TOMBSTONE_METADATA_STORE_URL"
BK_URL = "TOMBSTONE_BOOKKEEPER_METADATA_URL"
SERVERS = "TOMBSTONE_ZOOKEEPER_SERVERS"
CHROOT = "TOMBSTONE_ZOOKEEPER_CHROOT"


def stores(environ: dict[str, str]) -> MetadataStores:
    return ZooKeeperConfig.from_env(environ).stores


def test_unset_both_stores_are_the_zookeeper_settings() -> None:
    """With neither URL set, Pulsar's and BookKeeper's metadata are both in the ZooKeeper
    that the ZooKeeper settings name, as before the URLs existed."""
    expected = MetadataStores.on_zookeeper("zk1:2181,zk2:2181", "/pulsar")
    actual = stores({SERVERS: "zk1:2181,zk2:2181", CHROOT: "/pulsar"})
    assert expected == actual
    assert not actual.split
    assert ZooKeeperConfig.from_env({}).urls is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("zk:zk1:2181,zk2:2181/pulsar", StoreUrl(ZOOKEEPER, "zk1:2181,zk2:2181", "/pulsar")),
        ("metadata-store:zk:zk1:2181", StoreUrl(ZOOKEEPER, "zk1:2181", "")),
        ("zk1:2181/pulsar", StoreUrl(ZOOKEEPER, "zk1:2181", "/pulsar")),
        ("oxia://oxia:6648/broker", StoreUrl(OXIA, "oxia:6648", "broker")),
    ],
)
def test_pulsar_url_forms(raw: str, expected: StoreUrl) -> None:
    """broker.conf's metadataStoreUrl forms name Pulsar's store; BookKeeper's follows it."""
    assert MetadataStores(expected, expected) == stores({URL: raw})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("metadata-store:zk:zk1:2181/bk", StoreUrl(ZOOKEEPER, "zk1:2181", "/bk")),
        ("zk:zk1:2181,zk2:2181", StoreUrl(ZOOKEEPER, "zk1:2181,zk2:2181", "")),
        ("metadata-store:oxia://oxia:6648/bookkeeper", StoreUrl(OXIA, "oxia:6648", "bookkeeper")),
        ("oxia://oxia:6648/bookkeeper", StoreUrl(OXIA, "oxia:6648", "bookkeeper")),
    ],
)
def test_bookkeeper_url_forms(raw: str, expected: StoreUrl) -> None:
    """bookkeeper.conf's metadataServiceUri in Pulsar's driver form, prefix optional."""
    assert expected == parse_bookkeeper_url(raw)


def test_bookkeeper_store_of_its_own_beside_the_zookeeper_settings() -> None:
    """Only BookKeeper's URL set: Pulsar's store stays the ZooKeeper settings'."""
    actual = stores({SERVERS: "zk1:2181", CHROOT: "/pulsar", BK_URL: "zk:zk1:2181/bk"})
    expected = MetadataStores(
        StoreUrl(ZOOKEEPER, "zk1:2181", "/pulsar"), StoreUrl(ZOOKEEPER, "zk1:2181", "/bk")
    )
    assert expected == actual
    assert actual.split


def test_oxia_namespaces_of_one_service() -> None:
    """Oxia's usual layout: one service, a namespace each for brokers and bookies."""
    actual = stores(
        {URL: "oxia://oxia:6648/broker", BK_URL: "metadata-store:oxia://oxia:6648/bookkeeper"}
    )
    expected = MetadataStores(
        StoreUrl(OXIA, "oxia:6648", "broker"), StoreUrl(OXIA, "oxia:6648", "bookkeeper")
    )
    assert expected == actual


@pytest.mark.parametrize("clash", [{SERVERS: "zk9:2181"}, {CHROOT: "/pulsar"}])
def test_url_and_zookeeper_settings_conflict(clash: dict[str, str]) -> None:
    """The URL and a non-default ZooKeeper server or chroot setting would both name Pulsar's
    store: refused, naming both settings."""
    with pytest.raises(ConfigError) as caught:
        ZooKeeperConfig.from_env({URL: "zk:zk1:2181/pulsar", **clash})
    (other,) = clash
    assert caught.value.variable == URL
    assert other in str(caught.value)


def test_url_beside_the_default_servers_value_is_accepted() -> None:
    """Spelling out the default connect string is no conflict."""
    assert stores({URL: "zk:zk1:2181", SERVERS: "127.0.0.1:2181"}).pulsar.servers == "zk1:2181"


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        (URL, "http://zk:2181"),
        (URL, "oxia://oxia/broker"),
        (BK_URL, "zk+hierarchical://zk1:2181;zk2:2181/pulsar/ledgers"),
        (BK_URL, "zk://zk1:2181/ledgers"),
        (BK_URL, "metadata-store:zk:"),
    ],
)
def test_malformed_urls_name_their_setting(variable: str, raw: str) -> None:
    """A URL that cannot be read is a `ConfigError` naming the variable."""
    with pytest.raises(ConfigError) as caught:
        ZooKeeperConfig.from_env({variable: raw})
    assert variable == caught.value.variable


def test_bookkeeper_driver_url_says_what_to_write_instead() -> None:
    """BookKeeper's own `zk+hierarchical://` form is refused with the spelling to use."""
    with pytest.raises(ValueError, match="zk:h1:2181,h2:2181/pulsar"):
        parse_bookkeeper_url("zk+hierarchical://h1:2181;h2:2181/pulsar/ledgers")


@pytest.fixture
def oxia() -> Iterator[OxiaServer]:
    with running_in_thread(shards=2) as server:
        yield server


async def test_an_oxia_url_opens_the_oxia_adapter(oxia: OxiaServer) -> None:
    """`oxia://host:port/namespace` opens a client of that Oxia service and namespace (the
    devstack server), and what is written there reads back."""
    zk = ZooKeeperConfig.from_env({URL: f"oxia://{oxia.address}/default"})
    async with connect_store(zk, zk.stores.pulsar) as store:
        assert isinstance(store, OxiaMetadataStore)
        await store.create("/managed-ledgers/t/ns/persistent/a", b"x", make_parents=True)
        assert (await store.get("/managed-ledgers/t/ns/persistent/a")).data == b"x"
        assert await store.get_children("/managed-ledgers/t/ns/persistent") == ["a"]


def test_a_session_timeout_oxia_refuses_names_the_setting() -> None:
    """Oxia takes session timeouts of 2 s to 5 min: another is a configuration error naming
    the session-timeout setting, before any connection."""
    zk = ZooKeeperConfig.from_env(
        {BK_URL: "oxia://oxia:6648/bookkeeper", "TOMBSTONE_ZOOKEEPER_SESSION_TIMEOUT": "1s"}
    )
    with pytest.raises(ConfigError, match="session timeouts") as caught:
        connect_store(zk, zk.stores.bookkeeper, setting=BK_URL)
    assert caught.value.variable == "TOMBSTONE_ZOOKEEPER_SESSION_TIMEOUT"


async def test_one_session_when_both_are_one_store(zk: ZooKeeperServer) -> None:
    """Both kinds of metadata in one store: one session, given for both."""
    config = ZooKeeperConfig.from_env({SERVERS: zk.address})
    async with contextlib.AsyncExitStack() as stack:
        pulsar, bookkeeper = await open_stores(stack, config)
        assert pulsar is bookkeeper


async def test_split_stores_read_their_own_chroots(zk: ZooKeeperServer) -> None:
    """Pulsar at /pulsar and BookKeeper at /bk of one ensemble: two sessions, each under its
    own chroot."""
    config = ZooKeeperConfig.from_env(
        {URL: f"zk:{zk.address}/pulsar", BK_URL: f"metadata-store:zk:{zk.address}/bk"}
    )
    async with contextlib.AsyncExitStack() as stack:
        root = await stack.enter_async_context(connect_store(ZooKeeperConfig(servers=zk.address)))
        await root.create("/pulsar/managed-ledgers", make_parents=True)
        await root.create("/bk/ledgers", make_parents=True)
        pulsar, bookkeeper = await open_stores(stack, config)
        assert pulsar is not bookkeeper
        assert await pulsar.get_children("/") == ["managed-ledgers"]
        assert await bookkeeper.get_children("/") == ["ledgers"]


async def test_zookeeper_sessions_pause_writes_in_a_migration_window(zk: ZooKeeperServer) -> None:
    """Every ZooKeeper session `open_stores` gives is guarded against PIP-454's copy, and
    BookKeeper's store in its own chroot follows Pulsar's record (`MigrationCoordinator` keeps
    it in Pulsar's store only): while it says COPYING, a ledger delete in BookKeeper's store
    is refused as an outage and deletes nothing; once FAILED, it goes through."""
    config = ZooKeeperConfig.from_env(
        {URL: f"zk:{zk.address}/pulsar", BK_URL: f"metadata-store:zk:{zk.address}/bk"}
    )
    async with contextlib.AsyncExitStack() as stack:
        root = await stack.enter_async_context(connect_store(ZooKeeperConfig(servers=zk.address)))
        await root.create("/bk/ledgers/00/0000/L0001", b"ledger", make_parents=True)
        await root.create("/pulsar", b"")
        coordinator = PulsarMigrationCoordinator(
            # Pulsar's own session: not ours, so not guarded.
            await stack.enter_async_context(ZkMetadataStore.connect(zk.address, chroot="/pulsar"))
        )
        await coordinator.set_initial_migration_phase()
        await coordinator.update_phase(MigrationPhase.COPYING)
        pulsar, bookkeeper = await open_stores(stack, config)
        ledger = await bookkeeper.get("/ledgers/00/0000/L0001")
        with pytest.raises(StoreUnavailable, match="COPYING"):
            await bookkeeper.delete("/ledgers/00/0000/L0001", version=ledger.version)
        with pytest.raises(StoreUnavailable, match="COPYING"):
            await pulsar.create("/managed-ledgers", b"")
        assert await root.exists("/bk/ledgers/00/0000/L0001") is not None
        await coordinator.update_phase(MigrationPhase.FAILED)
        for _ in range(100):  # the watch brings the new phase
            if guarded_write_refusal(bookkeeper) is None:
                break
            await asyncio.sleep(0.05)
        await bookkeeper.delete("/ledgers/00/0000/L0001", version=ledger.version)
        assert await root.exists("/bk/ledgers/00/0000/L0001") is None


async def test_the_default_session_is_pulsar_s_store(zk: ZooKeeperServer) -> None:
    """`connect_store(zk)` with only the URL set opens the URL's store, not the ZooKeeper
    settings' default servers."""
    config = ZooKeeperConfig.from_env({URL: f"zk:{zk.address}/pulsar"})
    async with connect_store(ZooKeeperConfig(servers=zk.address)) as root:
        await root.create("/pulsar/managed-ledgers", make_parents=True)
    async with connect_store(config) as pulsar:
        assert await pulsar.get_children("/") == ["managed-ledgers"]


def test_a_deployment_on_zookeeper_runs_without_the_oxia_client() -> None:
    """The `oxia` client is installed on its own (its wheel's declared dependencies cannot be
    installed beside ours): the services import it only for an `oxia://` store, and without it
    such a store is a configuration error naming the setting and the install command."""
    script = """
import sys
sys.modules["oxia"] = None  # as if not installed: importing it raises ImportError
import services.deleter.app, services.marker.app, services.verifier.app
import services.scan.extract.stores
from services.core.config import ZooKeeperConfig
from services.core.errors import ConfigError
from services.metadata.connect import connect_store
zk = ZooKeeperConfig.from_env({"TOMBSTONE_METADATA_STORE_URL": "oxia://oxia:6648/broker"})
try:
    connect_store(zk, zk.stores.pulsar)
except ConfigError as e:
    print(e.variable, "|", e)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("TOMBSTONE_METADATA_STORE_URL |"), done.stdout
    assert "pip install --no-deps oxia==" in done.stdout
