"""Where each part of the Compose stack keeps BookKeeper's ledgers, derived from its settings.

Pulsar 4.0's rules, restated (sources named per function):

- A `metadata-store:` BookKeeper URI is handled by Pulsar's driver
  (`org.apache.pulsar.metadata.bookkeeper.AbstractMetadataDriver`, base of
  `PulsarMetadataBookieDriver` and `PulsarMetadataClientDriver`). `createMetadataStore()` drops
  the `metadata-store:` prefix and opens the rest as a metadata-store URL, unless the caller
  passed its own store instance (`METADATA_STORE_INSTANCE`). `resolveLedgersRootPath()` takes
  `java.net.URI.create(uri).getPath()`, which is null for an opaque URI such as
  `metadata-store:zk:host:2181/x` (its scheme-specific part does not start with `/`), and then
  falls back to `BookKeeperConstants.DEFAULT_ZK_LEDGERS_ROOT_PATH`, `/ledgers`.
- A `zk:` metadata-store URL (`MetadataStoreFactoryImpl`, `ZKMetadataStore`) is a ZooKeeper
  connect string; everything from its first `/` is a chroot (`ZKMetadataStore.initializeCluster`
  splits it the same way).
- The broker (`ServiceConfiguration.getBookkeeperMetadataStoreUrl`) uses
  `bookkeeperMetadataServiceUri` when it is set, else `metadata-store:` + `metadataStoreUrl` +
  `/ledgers` with its own metadata store passed as the instance
  (`BookKeeperClientFactoryImpl`, `isBookkeeperMetadataStoreSeparated()` false), so only that
  store's chroot applies.
- `bin/pulsar initialize-cluster-metadata` (`PulsarClusterMetadataSetup.initializeCluster`)
  formats BookKeeper with `metadataServiceUri = "metadata-store:" + --metadata-store`
  (`--zookeeper Z` means `zk:Z`) through a fresh driver, and only when `/ledgers` does not
  exist in that store.

Every function is pure: it takes the settings as Compose passes them and returns absolute
ZooKeeper paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

DEFAULT_LEDGERS_ROOT = "/ledgers"  # BookKeeperConstants.DEFAULT_ZK_LEDGERS_ROOT_PATH
METADATA_STORE_SCHEME = "metadata-store:"  # AbstractMetadataDriver.METADATA_STORE_SCHEME
ZK_SCHEME = "zk:"  # ZKMetadataStore.ZK_SCHEME_IDENTIFIER


class NotModelled(ValueError):
    """A setting outside the rules above (another scheme or URI shape)."""


def zk_chroot(metadata_store_url: str) -> str:
    """The ZooKeeper chroot of a metadata-store URL: from the first `/` of the connect string
    (after an optional `zk:` prefix), "" for none."""
    connect = metadata_store_url.removeprefix(ZK_SCHEME)
    if "://" in connect:
        raise NotModelled(f"not a ZooKeeper metadata store: {metadata_store_url!r}")
    slash = connect.find("/")
    return connect[slash:].rstrip("/") if slash > 0 else ""


def driver_ledgers_root(metadata_service_uri: str) -> str:
    """`AbstractMetadataDriver.resolveLedgersRootPath()` for a `metadata-store:` URI: the URI's
    path, which Java leaves undefined for an opaque URI, so always the default root here."""
    if not metadata_service_uri.startswith(METADATA_STORE_SCHEME):
        raise NotModelled(f"not a metadata-store: URI: {metadata_service_uri!r}")
    scheme_specific = metadata_service_uri[len(METADATA_STORE_SCHEME) :]
    if scheme_specific.startswith("/"):
        raise NotModelled(f"hierarchical metadata-store URI: {metadata_service_uri!r}")
    return DEFAULT_LEDGERS_ROOT


def _join(chroot: str, root: str) -> str:
    return f"{chroot}{root}" if chroot else root


def driver_ledgers_path(metadata_service_uri: str, *, shared_store_url: str | None = None) -> str:
    """Absolute path of the ledgers root a `metadata-store:` driver uses: the chroot of the
    store it opens (or of the store it was handed) plus its resolved root."""
    root = driver_ledgers_root(metadata_service_uri)
    if shared_store_url is not None:
        return _join(zk_chroot(shared_store_url), root)
    store_url = metadata_service_uri[len(METADATA_STORE_SCHEME) :].replace(";", ",")
    return _join(zk_chroot(store_url), root)


def bookie_ledgers_path(bookie_env: Mapping[str, str]) -> str:
    """The bookie: its `metadataServiceUri` through a driver that opens its own store."""
    uri = bookie_env.get("metadataServiceUri", "").strip()
    if not uri:
        raise NotModelled("the bookie sets no metadataServiceUri")
    return driver_ledgers_path(uri)


def broker_ledgers_path(broker_env: Mapping[str, str]) -> str:
    """The broker: `ServiceConfiguration.getBookkeeperMetadataStoreUrl()` and whether its
    metadata store is shared with the BookKeeper client."""
    store_url = broker_env.get("metadataStoreUrl", "").strip()
    if not store_url:
        zookeeper = broker_env.get("zookeeperServers", "").strip()
        store_url = f"{ZK_SCHEME}{zookeeper}" if zookeeper else ""
    separate = broker_env.get("bookkeeperMetadataServiceUri", "").strip()
    if separate:
        return driver_ledgers_path(separate)
    uri = f"{METADATA_STORE_SCHEME}{store_url}{DEFAULT_LEDGERS_ROOT}"
    return driver_ledgers_path(uri, shared_store_url=store_url)


def _option(command: Sequence[str], *names: str) -> str | None:
    for index, word in enumerate(command):
        if word in names and index + 1 < len(command):
            return command[index + 1]
        for name in names:
            if word.startswith(f"{name}="):
                return word.split("=", 1)[1]
    return None


def init_ledgers_path(command: Sequence[str]) -> str:
    """`initialize-cluster-metadata`: where it formats BookKeeper (and checks `/ledgers`)."""
    if "initialize-cluster-metadata" not in command:
        raise NotModelled("not an initialize-cluster-metadata command")
    if _option(command, "--existing-bk-metadata-service-uri", "--bookkeeper-metadata-service-uri"):
        raise NotModelled("BookKeeper formatted elsewhere (existing metadata service URI)")
    store_url = _option(command, "--metadata-store", "-md")
    if store_url is None:
        zookeeper = _option(command, "--zookeeper", "-zk")
        if zookeeper is None:
            raise NotModelled("no --metadata-store or --zookeeper")
        store_url = f"{ZK_SCHEME}{zookeeper}"
    return driver_ledgers_path(f"{METADATA_STORE_SCHEME}{store_url}")


def tombstone_ledgers_path(chroot: str, ledgers_root: str) -> str:
    """A Tombstone service: `TOMBSTONE_ZOOKEEPER_CHROOT` prefixes every path it reads, the
    service's `*_LEDGERS_ROOT` is the root under it."""
    return _join(chroot.rstrip("/"), ledgers_root)


def tombstone_metadata_chroot(chroot: str) -> str:
    """The chroot under which a Tombstone service reads `/managed-ledgers` and `/schemas`."""
    return chroot.rstrip("/")


def _environment(service: Mapping[str, object], values: Mapping[str, str]) -> dict[str, str]:
    from tests.compose.stack_files import interpolate

    raw = service.get("environment") or {}
    if not isinstance(raw, Mapping):
        raise NotModelled("environment must be a mapping")
    return {str(name): interpolate(str(value), dict(values)) for name, value in raw.items()}


def _without_keys(environment: dict[str, str]) -> dict[str, str]:
    """The environment less the signing settings: the key files are mounted into the
    containers (not here), and keys say nothing about where ledgers live."""
    signing = ("_TRUSTED_KEYS", "_SIGNING_KEYS", "_REQUIRE_SIGNED")
    return {k: v for k, v in environment.items() if not k.endswith(signing)}


def _command(service: Mapping[str, object], values: Mapping[str, str]) -> list[str]:
    from tests.compose.stack_files import interpolate

    raw = service.get("command") or []
    if not isinstance(raw, list):
        raise NotModelled("command must be a list")
    return [interpolate(str(word), dict(values)) for word in raw]


def stack_ledgers_paths(compose: Mapping[str, object], values: Mapping[str, str]) -> dict[str, str]:
    """The absolute ledgers root each part of the parsed Compose file uses, with `values` (the
    `.env` settings) interpolated: `bookie`, `broker`, `pulsar-init`, and each Tombstone service
    that reads ledgers (`verifier`, `deleter`, from their own `from_env()`)."""
    from services.deleter.config import DeleterConfig
    from services.verifier.config import VerifierConfig

    services = compose["services"]
    assert isinstance(services, Mapping)
    verifier = VerifierConfig.from_env(_without_keys(_environment(services["verifier"], values)))
    deleter = DeleterConfig.from_env(_without_keys(_environment(services["deleter"], values)))
    return {
        "bookie": bookie_ledgers_path(_environment(services["bookie"], values)),
        "broker": broker_ledgers_path(_environment(services["broker"], values)),
        "pulsar-init": init_ledgers_path(_command(services["pulsar-init"], values)),
        "verifier": tombstone_ledgers_path(verifier.zookeeper.chroot, verifier.ledgers_root),
        "deleter": tombstone_ledgers_path(deleter.zookeeper.chroot, deleter.ledgers_root),
    }


def stack_metadata_chroots(
    compose: Mapping[str, object], values: Mapping[str, str]
) -> dict[str, str]:
    """The chroot under which the broker keeps `/managed-ledgers` (its `metadataStoreUrl`) and
    under which each Tombstone service reads it (`TOMBSTONE_ZOOKEEPER_CHROOT`)."""
    from services.core.config import ZooKeeperConfig

    services = compose["services"]
    assert isinstance(services, Mapping)
    broker = _environment(services["broker"], values)
    chroots = {"broker": zk_chroot(broker.get("metadataStoreUrl", ""))}
    for name in ("marker", "verifier", "deleter"):
        zookeeper = ZooKeeperConfig.from_env(_environment(services[name], values))
        if "/" in zookeeper.servers:
            raise NotModelled(f"{name}: a chroot in TOMBSTONE_ZOOKEEPER_SERVERS")
        chroots[name] = tombstone_metadata_chroot(zookeeper.chroot)
    return chroots


def disagreements(paths: Mapping[str, str]) -> dict[str, str]:
    """The parts whose path differs from pulsar-init's (or from the broker's, for chroots);
    empty when all agree."""
    reference = paths.get("pulsar-init", paths.get("broker"))
    return {name: path for name, path in paths.items() if path != reference}
