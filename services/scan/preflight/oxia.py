"""Pre-flight of a metadata store on Oxia: the service answers, the namespace opens, the
Pulsar roots are there and the cluster is registered, as on ZooKeeper.

What the ZooKeeper pre-flight also checks has no Oxia meaning and is skipped, with the
reason said (`OXIA_SKIPPED`): ZooKeeper's authentication, ACLs and TLS (an Oxia client has
none of them), and the scan's zxid (Oxia has no global transaction id).
"""

from __future__ import annotations

import asyncio

from services.core.shared_clusters import StoreUrl
from services.core.zk_security import ZooKeeperSecurity
from services.metadata import MANAGED_LEDGERS_ROOT, MetadataError, StoreUnavailable
from services.scan.extract.stores import OXIA_DEFAULT_NAMESPACE, open_store
from services.scan.preflight.problems import Problem
from services.scan.preflight.tree import (
    CLUSTERS_ROOT,
    children_or_none,
    exists_or_true,
    reach,
    servers,
    tree_problems,
)

#: The checks skipped on Oxia, each with why (printed by the pre-flight).
OXIA_SKIPPED = (
    "ZooKeeper authentication, ACLs and TLS (TOMBSTONE_ZOOKEEPER_AUTH_*, *_TLS_*): an Oxia "
    "client uses none of them",
    "the scan's zxid: Oxia has no global transaction id; each record's version id and "
    "modification time are recorded instead (docs/reconciler.md, On Oxia)",
)


async def check_oxia_store(
    url: StoreUrl,
    *,
    option: str,
    ledgers_root: str | None,
    cluster: str | None,
    managed_ledgers: bool,
    timeout_s: float,
) -> list[Problem]:
    """Every problem of the Oxia namespace `url` names (`option` named it): a TCP connect
    first, so "refused", "no answer" and "unknown host" are told apart, then one client that
    reads the roots. [] when the extract can read it."""
    host, port = servers(url.servers)[0]
    unreachable = await reach(host, port, timeout_s, what="Oxia", option=option)
    if unreachable is not None:
        return [unreachable]
    namespace = url.root or OXIA_DEFAULT_NAMESPACE
    where = f"Oxia {url.servers} (namespace {namespace})"
    try:
        async with open_store(url, timeout_s=timeout_s, security=ZooKeeperSecurity()) as store:
            async with asyncio.timeout(timeout_s):
                found = await asyncio.gather(
                    exists_or_true(store, MANAGED_LEDGERS_ROOT if managed_ledgers else None),
                    exists_or_true(store, ledgers_root),
                    children_or_none(store, CLUSTERS_ROOT if cluster is not None else None),
                )
    except Exception as e:  # every failure is one problem line, whatever the client raised
        reason = "no answer to reads" if isinstance(e, TimeoutError) else f"{type(e).__name__}: {e}"
        if isinstance(e, MetadataError):
            reason = str(e)
        if isinstance(e, StoreUnavailable):
            reason = f"gave no shard assignments or reads within {timeout_s:g} s ({e})"
        return [
            Problem(
                f"{where} accepts connections but {reason}",
                f"check that this is Oxia's public port and that the namespace exists, or fix "
                f"{option}",
            )
        ]
    ml, ledgers, clusters = found
    return tree_problems(
        where,
        option,
        (ml, ledgers, clusters if isinstance(clusters, list) else None),
        ledgers_root=ledgers_root,
        cluster=cluster,
        managed_ledgers=managed_ledgers,
    )
