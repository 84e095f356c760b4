"""Where Pulsar's metadata and BookKeeper's ledger metadata are, in Pulsar's own URL forms.

Pulsar keeps its metadata (managed ledgers, cursors, schemas, namespaces) in the store that
broker.conf's `metadataStoreUrl` names; BookKeeper keeps its ledger metadata where
bookkeeper.conf's `metadataServiceUri` says. On ZooKeeper the two are usually one ensemble
and chroot; on Oxia they are two namespaces of one service, and some ZooKeeper operators give
BookKeeper a chroot or an ensemble of its own. Tombstone reads each kind of metadata where it
is: ledger znodes, `LAYOUT` and the ledgers root in the BookKeeper store, everything else
(Tombstone's own znodes included) in the Pulsar store.

Unset, both are the ZooKeeper that `TOMBSTONE_ZOOKEEPER_SERVERS` and
`TOMBSTONE_ZOOKEEPER_CHROOT` name, so existing deployments change nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from services.core._env import Setting, setting
from services.core.errors import ConfigError
from services.core.shared_clusters import ZOOKEEPER, StoreUrl, parse_store_url

_BOOKKEEPER_PREFIX = "metadata-store:"
# BookKeeper's own ZooKeeper drivers: their path is the chroot *and* the ledgers root together
# (`zk+hierarchical://zk:2181/pulsar/ledgers`), which cannot be split without guessing.
_BOOKKEEPER_DRIVER_SCHEMES = ("zk://", "zk+")


def parse_bookkeeper_url(raw: str) -> StoreUrl:
    """bookkeeper.conf's `metadataServiceUri` in Pulsar's driver form: `metadata-store:` and
    then a store URL (`zk:host:port[,...][/chroot]` or `oxia://host:port/namespace`), or a
    store URL alone. BookKeeper's own `zk+hierarchical://` forms are refused with the
    spelling to use instead."""
    url = raw.strip()
    if url.startswith(_BOOKKEEPER_PREFIX):
        url = url[len(_BOOKKEEPER_PREFIX) :]
    if url.startswith(_BOOKKEEPER_DRIVER_SCHEMES):
        raise ValueError(
            f"{raw!r}: BookKeeper's own driver URL names the chroot and the ledgers root in one "
            "path; give the store as zk:host:port[,host:port...][/chroot] and the ledgers "
            "root in TOMBSTONE_<SERVICE>_LEDGERS_ROOT (zk+hierarchical://h1:2181;h2:2181"
            "/pulsar/ledgers is zk:h1:2181,h2:2181/pulsar with the root /ledgers)"
        )
    return parse_store_url(url)


METADATA_STORE_URL: Setting[StoreUrl | None] = setting(
    "METADATA_STORE_URL",
    parse_store_url,
    None,
    "Pulsar's metadata store, as broker.conf's metadataStoreUrl: zk:host:port[,...][/chroot] "
    "or oxia://host:port/namespace. Unset: the ZooKeeper of TOMBSTONE_ZOOKEEPER_SERVERS "
    "under TOMBSTONE_ZOOKEEPER_CHROOT. The ZooKeeper timeouts apply to either store.",
    format="metadata store URL",
)
BOOKKEEPER_METADATA_URL: Setting[StoreUrl | None] = setting(
    "BOOKKEEPER_METADATA_URL",
    parse_bookkeeper_url,
    None,
    "Where BookKeeper keeps its ledger metadata, as bookkeeper.conf's metadataServiceUri "
    "(metadata-store:zk:host:port[,...][/chroot] or metadata-store:oxia://host:port/namespace;"
    " the metadata-store: prefix is optional). Unset: Pulsar's metadata store.",
    format="metadata store URL",
)


@dataclass(frozen=True, slots=True)
class MetadataStores:
    """The two metadata stores Tombstone reads: often one and the same."""

    pulsar: StoreUrl
    """Pulsar's metadata: managed ledgers, cursors, schemas, namespaces, Tombstone's znodes."""
    bookkeeper: StoreUrl
    """BookKeeper's ledger metadata: ledger znodes, `LAYOUT`, the ledgers root."""

    @property
    def split(self) -> bool:
        """Whether BookKeeper's metadata is in a store of its own (a second session)."""
        return self.bookkeeper != self.pulsar

    @classmethod
    def on_zookeeper(cls, servers: str, chroot: str = "") -> MetadataStores:
        """Both kinds of metadata in one ZooKeeper under one chroot (the default)."""
        store = StoreUrl(ZOOKEEPER, servers, chroot)
        return cls(store, store)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str],
        *,
        zookeeper: StoreUrl,
        servers: Setting[str],
        chroot: Setting[str],
    ) -> MetadataStores | None:
        """The stores the settings name; None when neither URL is set (the ZooKeeper
        settings name both). `zookeeper` is the store the ZooKeeper settings name
        (the default); the `servers` and `chroot` settings that name it must keep their
        defaults when the URL is set, or two settings would name Pulsar's store."""
        url = METADATA_STORE_URL.read(environ)
        bookkeeper = BOOKKEEPER_METADATA_URL.read(environ)
        if url is None and bookkeeper is None:
            return None
        if url is not None:
            for clash, value in ((servers, zookeeper.servers), (chroot, zookeeper.root)):
                if value != clash.default:
                    raise ConfigError(
                        METADATA_STORE_URL.name,
                        f"names Pulsar's metadata store, and so does {clash.name}: set only one",
                    )
        pulsar = url or zookeeper
        return cls(pulsar, bookkeeper or pulsar)
