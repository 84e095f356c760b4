"""Metadata-store sessions opened from the operator's settings, whatever the store's kind.

`TOMBSTONE_ZOOKEEPER_*` give the session settings (timeouts for any store; authentication,
ACLs and TLS for ZooKeeper); a `StoreUrl` says which store (Pulsar's, BookKeeper's, a
neighbour cluster's, the configuration store).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import TYPE_CHECKING

from services.core.config import ZK_SESSION, ZooKeeperConfig
from services.core.errors import ConfigError
from services.core.metadata_stores import BOOKKEEPER_METADATA_URL, METADATA_STORE_URL
from services.core.shared_clusters import OXIA, ZOOKEEPER, StoreUrl
from services.metadata.migration.guard import MigrationGuardedStore
from services.metadata.migration.participant import Participant
from services.metadata.oxia.limits import CLIENT_RELEASE, MAX_SESSION_TIMEOUT, MIN_SESSION_TIMEOUT
from services.metadata.store import MetadataStore
from services.metadata.zookeeper.store import ZkMetadataStore

if TYPE_CHECKING:
    from services.metadata.oxia.store import OxiaMetadataStore


def connect_store(
    zk: ZooKeeperConfig,
    store: StoreUrl | None = None,
    *,
    setting: str = METADATA_STORE_URL.name,
    migration: Participant | None = None,
    read_only: bool = False,
) -> AbstractAsyncContextManager[MetadataStore]:
    """A session to `store` (default: Pulsar's metadata store, `zk.stores.pulsar`). `setting`
    is the one that named the store, for the error when this build cannot open it.

    A ZooKeeper session comes guarded against PIP-454's migration to Oxia
    (`services.metadata.migration`): writes pause while the copy runs, and a migrated store is
    not read. The record is read from the store itself, where the session registers as a
    migration participant, or followed by `migration` (another guard's participant, which
    then counts this session's writes too) when it lives elsewhere. A `read_only` session (a
    neighbour cluster's store, the configuration store) follows the record without
    registering. Pulsar keeps no record on Oxia: Oxia is never guarded."""
    where = store or zk.stores.pulsar
    if where.kind == ZOOKEEPER:
        return _guarded(_connect_zookeeper(_at(zk, where)), migration, register=not read_only)
    if where.kind == OXIA:
        return _connect_oxia(zk, where, setting)
    raise ConfigError(setting, f"{where}: unknown metadata store kind {where.kind!r}")


def _connect_oxia(
    zk: ZooKeeperConfig, where: StoreUrl, setting: str
) -> AbstractAsyncContextManager[OxiaMetadataStore]:
    """A client of the Oxia service at `where` for its namespace (Pulsar's `oxia://` URLs name
    it; none means Oxia's `default`). ZooKeeper's security settings do not apply."""
    session = zk.session_timeout.total_seconds()
    if not MIN_SESSION_TIMEOUT <= session <= MAX_SESSION_TIMEOUT:
        raise ConfigError(
            ZK_SESSION.name,
            f"{where}: Oxia accepts session timeouts from {MIN_SESSION_TIMEOUT:g} s to "
            f"{MAX_SESSION_TIMEOUT:g} s, not {session:g} s",
        )
    try:
        # Only a deployment on Oxia needs the client (installed on its own: docs/oxia-adapter.md).
        from services.metadata.oxia.store import OxiaMetadataStore
    except ImportError as e:
        raise ConfigError(
            setting,
            f"{where}: the oxia client is not installed "
            f"(pip install --no-deps oxia=={CLIENT_RELEASE}): {e}",
        ) from e
    return OxiaMetadataStore.connect(
        where.servers,
        namespace=where.root or "default",
        session_timeout=session,
        request_timeout=zk.operation_timeout.total_seconds(),
    )


@contextlib.asynccontextmanager
async def _guarded(
    session: AbstractAsyncContextManager[ZkMetadataStore],
    migration: Participant | None,
    *,
    register: bool,
) -> AsyncIterator[MigrationGuardedStore[ZkMetadataStore]]:
    async with (
        session as raw,
        MigrationGuardedStore(raw, participant=migration, register=register) as guarded,
    ):
        yield guarded


def zookeeper_session(store: MetadataStore) -> ZkMetadataStore | None:
    """The ZooKeeper session under `store` (for what only ZooKeeper has: ACLs), or None when
    `store` is not ZooKeeper."""
    if isinstance(store, MigrationGuardedStore):
        store = store.inner
    return store if isinstance(store, ZkMetadataStore) else None


def _connect_zookeeper(zk: ZooKeeperConfig) -> AbstractAsyncContextManager[ZkMetadataStore]:
    """A session to the cluster's ZooKeeper (servers, chroot, session and request timeouts,
    authentication, ACLs and TLS)."""
    return ZkMetadataStore.connect(
        zk.servers,
        chroot=zk.chroot or None,
        session_timeout=zk.session_timeout.total_seconds(),
        request_timeout=zk.operation_timeout.total_seconds(),
        security=zk.security,
    )


async def open_stores(
    stack: AsyncExitStack, zk: ZooKeeperConfig
) -> tuple[MetadataStore, MetadataStore]:
    """Sessions to Pulsar's metadata store and BookKeeper's, on `stack`: one session, given
    twice, when both are the same store."""
    stores = zk.stores
    pulsar = await stack.enter_async_context(connect_store(zk, stores.pulsar))
    if not stores.split:
        return pulsar, pulsar
    # Pulsar's migration record governs BookKeeper's metadata too (bookies take part in the
    # same migration), wherever in ZooKeeper that metadata is; its writes are counted by the
    # participant registered next to that record.
    migration = pulsar.participant if isinstance(pulsar, MigrationGuardedStore) else None
    bookkeeper = await stack.enter_async_context(
        connect_store(
            zk, stores.bookkeeper, setting=BOOKKEEPER_METADATA_URL.name, migration=migration
        )
    )
    return pulsar, bookkeeper


def connect_pulsar_store(zk: ZooKeeperConfig) -> AbstractAsyncContextManager[MetadataStore]:
    """A session to Pulsar's metadata store (where Tombstone's own znodes are too)."""
    return connect_store(zk, zk.stores.pulsar)


def connect_bookkeeper_store(zk: ZooKeeperConfig) -> AbstractAsyncContextManager[MetadataStore]:
    """A session to the store of BookKeeper's ledger metadata."""
    return connect_store(zk, zk.stores.bookkeeper, setting=BOOKKEEPER_METADATA_URL.name)


def _at(zk: ZooKeeperConfig, store: StoreUrl) -> ZooKeeperConfig:
    """Our session settings (timeouts, security) for a ZooKeeper store: Pulsar's,
    BookKeeper's, a neighbour cluster's, or Pulsar's configuration store."""
    return dataclasses.replace(zk, servers=store.servers, chroot=store.root, urls=None)
