"""A metadata-store session opened with the operator's `TOMBSTONE_ZOOKEEPER_*` settings."""

from __future__ import annotations

import dataclasses
from contextlib import AbstractAsyncContextManager

from services.core.config import ZooKeeperConfig
from services.core.shared_clusters import StoreUrl
from services.metadata.zookeeper.store import ZkMetadataStore


def connect_store(zk: ZooKeeperConfig) -> AbstractAsyncContextManager[ZkMetadataStore]:
    """A session to the cluster's ZooKeeper (servers, chroot, session and request timeouts,
    authentication, ACLs and TLS)."""
    return ZkMetadataStore.connect(
        zk.servers,
        chroot=zk.chroot or None,
        session_timeout=zk.session_timeout.total_seconds(),
        request_timeout=zk.operation_timeout.total_seconds(),
        security=zk.security,
    )


def at(zk: ZooKeeperConfig, store: StoreUrl) -> ZooKeeperConfig:
    """Our session settings (timeouts, security) for another ZooKeeper store: a neighbour cluster's
    metadata store, or Pulsar's configuration store."""
    return dataclasses.replace(zk, servers=store.servers, chroot=store.root)
