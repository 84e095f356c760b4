"""Sessions to the metadata stores a scan reads, ZooKeeper or Oxia, behind the port.

In: a `StoreUrl` and the run's timeouts (and ZooKeeper's security settings, which apply to
ZooKeeper only). Out: a `MetadataStore`. The extract's tasks, its listings and the
pre-flight open every store here, so every other module of the reconciler sees the port
only and reads ZooKeeper and Oxia with the same code.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from services.core.shared_clusters import OXIA, ZOOKEEPER, StoreUrl
from services.core.zk_security import ZooKeeperSecurity
from services.metadata import MetadataStore, ZkMetadataStore
from services.metadata.oxia.store import (
    MAX_SESSION_TIMEOUT,
    MIN_SESSION_TIMEOUT,
    OxiaMetadataStore,
)

ZK_MIN_SESSION_TIMEOUT_S = 4.0
"""ZooKeeper's session timeout is at least twice its tick (2 s by default)."""
OXIA_DEFAULT_NAMESPACE = "default"
"""The namespace of an `oxia://host:port` URL that names none (Oxia's own default)."""


def session_timeout_s(url: StoreUrl, timeout_s: float) -> float:
    """The session timeout a scan asks `url`'s store for: the run's timeout, raised to the
    store's floor (and, on Oxia, capped at its ceiling: a long `--zk-timeout` still opens)."""
    session = max(timeout_s, ZK_MIN_SESSION_TIMEOUT_S)
    if url.kind == OXIA:
        return min(max(session, MIN_SESSION_TIMEOUT), MAX_SESSION_TIMEOUT)
    return session


@contextlib.asynccontextmanager
async def open_store(
    url: StoreUrl,
    *,
    timeout_s: float,
    security: ZooKeeperSecurity,
    request_timeout_s: float | None = None,
) -> AsyncIterator[MetadataStore]:
    """One session to `url`: connect and request timeouts `timeout_s` (requests
    `request_timeout_s` when given). `security` is ZooKeeper's; an Oxia client has none."""
    requests = timeout_s if request_timeout_s is None else request_timeout_s
    session = session_timeout_s(url, timeout_s)
    store: contextlib.AbstractAsyncContextManager[MetadataStore]
    if url.kind == ZOOKEEPER:
        store = ZkMetadataStore.connect(
            url.servers,
            chroot=url.root or None,
            session_timeout=session,
            request_timeout=requests,
            connect_timeout=timeout_s,
            security=security,
        )
    elif url.kind == OXIA:
        # The Oxia client waits `request_timeout` for its shard assignments at connect: the
        # longer of the two, so a short request bound does not refuse a slow first answer.
        store = OxiaMetadataStore.connect(
            url.servers,
            namespace=url.root or OXIA_DEFAULT_NAMESPACE,
            session_timeout=session,
            request_timeout=max(requests, timeout_s),
        )
    else:
        raise ValueError(f"{url}: unknown metadata store kind {url.kind!r}")
    async with store as opened:
        yield opened
