"""Other Pulsar clusters that share this cluster's BookKeeper, as the operator declares them.

Pulsar lets several clusters use one BookKeeper (`pulsar initialize-cluster-metadata
--existing-bk-metadata-service-uri`, Pulsar >= 2.6): each keeps its own metadata store, the
ledgers root is shared, and a ledger is unreferenced only when no cluster references it. The
operator names every such cluster and how to read its metadata store, in Pulsar's own URL
forms (`metadataStoreUrl`, `zookeeperServers`):

    TOMBSTONE_SHARED_CLUSTERS="east=zk:zk-east-1:2181,zk-east-2:2181/pulsar west=zk-west:2181"

Entries are separated by white space (a connect string has commas of its own). The forms
understood: `zk:host:port[,host:port...][/chroot]`, `metadata-store:zk:...` (BookKeeper's
spelling), a bare `host:port[,...][/chroot]`, and `oxia://host:port[/namespace]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ZOOKEEPER = "zookeeper"
OXIA = "oxia"

# Pulsar's cluster names follow `NamedEntity` (letters, digits and `-_=:.`); `=` is left out
# here because it separates the name from the URL.
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9_:.\-]+")
_HOST_PORT = re.compile(r"[A-Za-z0-9_.\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}")


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """Where a cluster's metadata store is: a ZooKeeper connect string and chroot, or an
    Oxia service address and namespace."""

    kind: str
    servers: str
    """`host:port[,host:port...]` (ZooKeeper) or `host:port` (Oxia)."""
    root: str = ""
    """The ZooKeeper chroot (`/pulsar`), or the Oxia namespace; empty for none."""

    def __str__(self) -> str:
        if self.kind == OXIA:
            return f"oxia://{self.servers}" + (f"/{self.root}" if self.root else "")
        return f"zk:{self.servers}{self.root}"


@dataclass(frozen=True, slots=True)
class SharedCluster:
    """A Pulsar cluster whose metadata names ledgers in our ledgers root."""

    name: str
    store: StoreUrl


def parse_store_url(raw: str) -> StoreUrl:
    """A metadata-store URL in one of Pulsar's forms; `ValueError` says what is wrong."""
    url = raw.strip()
    if url.startswith("oxia://"):
        address, _, namespace = url[len("oxia://") :].partition("/")
        if not _HOST_PORT.fullmatch(address):
            raise ValueError(f"{raw!r}: oxia:// needs host:port")
        if "/" in namespace:
            raise ValueError(f"{raw!r}: an Oxia namespace has no '/'")
        return StoreUrl(OXIA, address, namespace)
    for prefix in ("metadata-store:zk:", "zk:"):
        if url.startswith(prefix):
            url = url[len(prefix) :]
            break
    if "://" in url:
        raise ValueError(f"{raw!r}: unknown scheme (zk:host:port/chroot or oxia://host:port)")
    hosts, slash, chroot = url.partition("/")
    chroot = slash + chroot if slash else ""
    if not hosts or not all(_HOST_PORT.fullmatch(host) for host in hosts.split(",")):
        raise ValueError(f"{raw!r}: needs host:port[,host:port...][/chroot]")
    if chroot == "/":
        chroot = ""
    if chroot and (chroot.endswith("/") or "//" in chroot or "/./" in f"{chroot}/"):
        raise ValueError(f"{raw!r}: malformed chroot {chroot!r}")
    if "/../" in f"{chroot}/":
        raise ValueError(f"{raw!r}: malformed chroot {chroot!r}")
    return StoreUrl(ZOOKEEPER, hosts, chroot)


def parse_shared_clusters(raw: str) -> tuple[SharedCluster, ...]:
    """`name=url` entries separated by white space; names unique, URLs in Pulsar's forms."""
    clusters: list[SharedCluster] = []
    for entry in raw.split():
        name, eq, url = entry.partition("=")
        if not eq or not name or not url:
            raise ValueError(f"{entry!r}: expected <cluster>=<metadata store URL>")
        if not _CLUSTER_NAME.fullmatch(name) or name in (".", ".."):
            raise ValueError(f"{entry!r}: {name!r} is not a Pulsar cluster name")
        if any(c.name == name for c in clusters):
            raise ValueError(f"cluster {name!r} is declared twice")
        clusters.append(SharedCluster(name, parse_store_url(url)))
    return tuple(clusters)
