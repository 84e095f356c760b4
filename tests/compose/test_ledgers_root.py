"""The bookie, the broker, `initialize-cluster-metadata` and the Tombstone services agree on
where BookKeeper's ledgers live, as derived from compose.yaml by Pulsar 4.0's own rules.

The rules are restated in `tests/compose/ledgers_root.py`, after
`org.apache.pulsar.metadata.bookkeeper.AbstractMetadataDriver` (`resolveLedgersRootPath`,
`createMetadataStore`), `ServiceConfiguration.getBookkeeperMetadataStoreUrl` with
`BookKeeperClientFactoryImpl` (the broker shares its metadata store with its BookKeeper
client), `PulsarClusterMetadataSetup.initializeCluster` and `ZKMetadataStore` (a path after
the ZooKeeper hosts is a chroot).
"""

from __future__ import annotations

import pytest
import yaml

from tests.compose.ledgers_root import (
    NotModelled,
    bookie_ledgers_path,
    broker_ledgers_path,
    disagreements,
    init_ledgers_path,
    stack_ledgers_paths,
    stack_metadata_chroots,
    zk_chroot,
)
from tests.compose.stack_files import COMPOSE_FILE, compose, env_example

OLD_BOOKIE_URI = "metadata-store:zk:zookeeper:2181/ledgers"
FIXED_BOOKIE_URI = "metadata-store:zk:zookeeper:2181"


def test_every_part_uses_the_same_ledgers_root() -> None:
    """From compose.yaml as shipped: bookie, broker, pulsar-init, verifier and deleter all use
    /ledgers at the root of the zookeeper container's tree."""
    paths = stack_ledgers_paths(compose(), env_example())
    assert (disagreements(paths), paths["pulsar-init"]) == ({}, "/ledgers")
    assert set(paths) == {"bookie", "broker", "pulsar-init", "verifier", "deleter"}


def test_the_old_bookie_uri_puts_the_bookie_under_a_chroot() -> None:
    """The URI the stack shipped with (`.../ledgers` after the host) makes the driver open the
    store with chroot /ledgers and then add its own /ledgers root: the bookie looks in
    /ledgers/ledgers, where nothing was formatted, so the derivation reports it."""
    text = COMPOSE_FILE.read_text(encoding="utf-8")
    fixed = f"metadataServiceUri: {FIXED_BOOKIE_URI}\n"
    assert fixed in text
    old = yaml.safe_load(text.replace(fixed, f"metadataServiceUri: {OLD_BOOKIE_URI}\n"))
    assert disagreements(stack_ledgers_paths(old, env_example())) == {"bookie": "/ledgers/ledgers"}


def test_tombstone_reads_managed_ledgers_where_the_broker_writes_them() -> None:
    """The marker, verifier and deleter read /managed-ledgers under the same chroot (none) as
    the broker's metadataStoreUrl."""
    chroots = stack_metadata_chroots(compose(), env_example())
    assert (disagreements(chroots), chroots["broker"]) == ({}, "")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("metadata-store:zk:zookeeper:2181", "/ledgers"),
        ("metadata-store:zk:zookeeper:2181/ledgers", "/ledgers/ledgers"),
        ("metadata-store:zk:zk1:2181;zk2:2181/pulsar", "/pulsar/ledgers"),
        ("metadata-store:zookeeper:2181", "/ledgers"),
    ],
)
def test_bookie_driver_rule(uri: str, expected: str) -> None:
    """A path after the hosts is a chroot; the driver's own root is always /ledgers (the URI is
    opaque, so `URI.getPath()` is null)."""
    assert expected == bookie_ledgers_path({"metadataServiceUri": uri})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"metadataStoreUrl": "zk:zookeeper:2181"}, "/ledgers"),
        ({"metadataStoreUrl": "zk:zookeeper:2181/pulsar"}, "/pulsar/ledgers"),
        ({"zookeeperServers": "zookeeper:2181"}, "/ledgers"),
        (
            {
                "metadataStoreUrl": "zk:zookeeper:2181",
                "bookkeeperMetadataServiceUri": "metadata-store:zk:zookeeper:2181/ledgers",
            },
            "/ledgers/ledgers",
        ),
    ],
)
def test_broker_rule(env: dict[str, str], expected: str) -> None:
    """Blank bookkeeperMetadataServiceUri: `metadata-store:<metadataStoreUrl>/ledgers` over the
    broker's own store, so only metadataStoreUrl's chroot counts; set: the driver rule."""
    assert expected == broker_ledgers_path(env)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["initialize-cluster-metadata", "--metadata-store", "zk:zk:2181"], "/ledgers"),
        (["initialize-cluster-metadata", "--zookeeper", "zk:2181/p"], "/p/ledgers"),
    ],
)
def test_initialize_cluster_metadata_rule(command: list[str], expected: str) -> None:
    """`initialize-cluster-metadata` formats BookKeeper at `metadata-store:<--metadata-store>`."""
    assert expected == init_ledgers_path(command)


def test_unmodelled_settings_are_refused() -> None:
    """Other URI shapes are not guessed at."""
    with pytest.raises(NotModelled):
        bookie_ledgers_path({"metadataServiceUri": "zk+hierarchical://zookeeper:2181/ledgers"})
    with pytest.raises(NotModelled):
        zk_chroot("oxia://oxia:6648/default")
