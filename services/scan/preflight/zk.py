"""Pre-flight of the metadata store: ZooKeeper answers, the Pulsar roots exist, the cluster is
one of the store's clusters.

A plain TCP connect to each server first, so that "connection refused", "no answer" and "no
such host" are told apart (a ZooKeeper session alone reports every one of them as a timeout);
then one short session on the servers that accepted, with aiozk's logger silenced (its retry
loop would print a traceback per failed attempt).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from services.core.shared_clusters import OXIA, StoreUrl
from services.core.zk_security import ZooKeeperRefused, ZooKeeperSecurity
from services.metadata import (
    MANAGED_LEDGERS_ROOT,
    MetadataError,
    StoreUnavailable,
    ZkMetadataStore,
)
from services.scan.preflight.oxia import check_oxia_store
from services.scan.preflight.problems import Problem
from services.scan.preflight.tree import (
    BOOKKEEPER_OPTION,
    CLUSTERS_ROOT,
    address_of,
    children_or_none,
    exists_or_true,
    reach,
    servers,
    tree_problems,
)

__all__ = ["check_metadata", "quiet", "servers"]

DEFAULT_TIMEOUT_S = 10.0
"""Each step of the check when the caller gives no timeout: the TCP connect to each server,
opening the session, the few reads together. The extract's own `--zk-timeout` default, so
the pre-flight refuses no store the run itself would wait for (a loaded ZooKeeper, or a
loaded host running the check, can take seconds to answer)."""
MIN_SESSION_TIMEOUT_S = 4.0
"""ZooKeeper's session timeout is at least twice its tick (2 s by default)."""


@contextlib.contextmanager
def quiet(name: str) -> Iterator[None]:
    """Drop the records of logger `name` and its children (`aiozk.session`, ...): they stop
    at a handler that discards them instead of reaching the root's or Python's last resort."""
    logger = logging.getLogger(name)
    sink = logging.NullHandler()
    propagate = logger.propagate
    logger.addHandler(sink)
    logger.propagate = False
    try:
        yield
    finally:
        logger.propagate = propagate
        logger.removeHandler(sink)


async def check_metadata(
    connect_string: str,
    chroot: str | None,
    ledgers_root: str,
    cluster: str,
    *,
    configuration_store: StoreUrl | None = None,
    bookkeeper_store: StoreUrl | None = None,
    metadata_store: StoreUrl | None = None,
    security: ZooKeeperSecurity | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Problem]:
    """Every problem found with the metadata store (and, when they are stores of their own,
    BookKeeper's store and the configuration store); [] when the extract can read them and
    the cluster is known. `bookkeeper_store`: where the ledgers root is when it is not the
    metadata store. `security`: the sessions' authentication and TLS
    (`TOMBSTONE_ZOOKEEPER_*`); `timeout_s`: each step's time (connect, session, reads), the
    run's `--zk-timeout`. `metadata_store`: Pulsar's store when it is not the ZooKeeper of
    `connect_string` and `chroot` (an Oxia namespace)."""
    secured = security or ZooKeeperSecurity()
    local_cluster = cluster if configuration_store is None else None
    ours_root = ledgers_root if bookkeeper_store is None else None
    if metadata_store is not None and metadata_store.kind == OXIA:
        ours = check_oxia_store(
            metadata_store,
            option="--metadata-store",
            ledgers_root=ours_root,
            cluster=local_cluster,
            managed_ledgers=True,
            timeout_s=timeout_s,
        )
    else:
        ours = _check_store(connect_string, chroot, ours_root, local_cluster, secured, timeout_s)
    checks = [ours]
    if bookkeeper_store is not None:
        checks.append(_check_bookkeeper_store(bookkeeper_store, ledgers_root, secured, timeout_s))
    if configuration_store is not None:
        checks.append(_check_configuration_store(configuration_store, cluster, secured, timeout_s))
    found = await asyncio.gather(*checks)
    return [problem for problems in found for problem in problems]


async def _check_bookkeeper_store(
    store: StoreUrl, ledgers_root: str, security: ZooKeeperSecurity, timeout_s: float
) -> list[Problem]:
    if store.kind == OXIA:
        return await check_oxia_store(
            store,
            option=BOOKKEEPER_OPTION,
            ledgers_root=ledgers_root,
            cluster=None,
            managed_ledgers=False,
            timeout_s=timeout_s,
        )
    return await _reach_then_check(
        BOOKKEEPER_OPTION,
        store.servers,
        store.root or None,
        ledgers_root,
        None,
        security,
        timeout_s,
        managed_ledgers=False,
    )


async def _check_configuration_store(
    store: StoreUrl, cluster: str, security: ZooKeeperSecurity, timeout_s: float
) -> list[Problem]:
    option = "--configuration-store"
    if store.kind == OXIA:
        return await check_oxia_store(
            store,
            option=option,
            ledgers_root=None,
            cluster=cluster,
            managed_ledgers=False,
            timeout_s=timeout_s,
        )
    return await _reach_then_check(
        option, store.servers, store.root or None, None, cluster, security, timeout_s
    )


async def _check_store(
    connect_string: str,
    chroot: str | None,
    ledgers_root: str | None,
    cluster: str | None,
    security: ZooKeeperSecurity,
    timeout_s: float,
) -> list[Problem]:
    hosts, slash, suffix = connect_string.partition("/")
    if slash:  # ZooKeeper's Java client takes a chroot there; the extract's client does not
        return [
            Problem(
                f"--zookeeper {connect_string}: a chroot in the connect string is not read",
                f"give --zookeeper {hosts} --chroot /{suffix}",
            )
        ]
    return await _reach_then_check(
        "--zookeeper", connect_string, chroot, ledgers_root, cluster, security, timeout_s
    )


async def _reach_then_check(
    option: str,
    connect_string: str,
    chroot: str | None,
    ledgers_root: str | None,
    cluster: str | None,
    security: ZooKeeperSecurity,
    timeout_s: float,
    *,
    managed_ledgers: bool | None = None,
) -> list[Problem]:
    """A TCP connect to every server (so each cause gets its own line), then the tree of the
    servers that answered, in one quiet session. `managed_ledgers`: whether Pulsar's
    `/managed-ledgers` must be there (default: in the store of the ledgers root, and in the
    metadata store; never in the configuration store alone)."""
    pairs = servers(connect_string)
    if not pairs:
        return [Problem(f"{option} {connect_string!r} names no server", "give host:port")]
    reached = await asyncio.gather(*(reach(host, port, timeout_s) for host, port in pairs))
    up = [address_of(h, p) for (h, p), problem in zip(pairs, reached, strict=True) if not problem]
    if not up:
        return [problem for problem in reached if problem is not None]
    with quiet("aiozk"):
        if managed_ledgers is None:
            managed_ledgers = option == "--zookeeper"
        found = await _check_tree(
            ",".join(up), chroot, ledgers_root, cluster, security, timeout_s, managed_ledgers
        )
        await asyncio.sleep(0)  # the closed session's cancelled tasks end while still quiet
    return found


async def _check_tree(
    address: str,
    chroot: str | None,
    ledgers_root: str | None,
    cluster: str | None,
    security: ZooKeeperSecurity,
    timeout_s: float,
    managed_ledgers: bool,
) -> list[Problem]:
    """The Pulsar roots in the store at `address`: `/managed-ledgers` when `managed_ledgers`
    (the metadata store), the ledgers root when `ledgers_root` is given (BookKeeper's store),
    the cluster's registration when `cluster` is (the configuration store; all in one store
    by default)."""
    where = f"ZooKeeper {address}" + (f" (chroot {chroot})" if chroot else "")
    try:
        # The store's own connect timeout, not a cancellation from outside: on a timeout it
        # closes the session it started, so none of the client's tasks outlives the check.
        async with ZkMetadataStore.connect(
            address,
            chroot=chroot,
            session_timeout=max(timeout_s, MIN_SESSION_TIMEOUT_S),
            request_timeout=timeout_s,
            connect_timeout=timeout_s,
            security=security,
        ) as store:
            async with asyncio.timeout(timeout_s):
                ml, ledgers, clusters = await asyncio.gather(
                    exists_or_true(store, MANAGED_LEDGERS_ROOT if managed_ledgers else None),
                    exists_or_true(store, ledgers_root),
                    children_or_none(store, CLUSTERS_ROOT if cluster is not None else None),
                )
    except ZooKeeperRefused as e:  # authentication refused, or no permission to read
        return [Problem(f"{where}: {e}", "fix the TOMBSTONE_ZOOKEEPER_AUTH_* settings")]
    except (TimeoutError, MetadataError) as e:
        reason = "no answer to reads" if isinstance(e, TimeoutError) else str(e)
        if isinstance(e, StoreUnavailable) and "cannot connect" in str(e):
            reason = f"opened no session within {timeout_s:g} s"
        return [
            Problem(
                f"{where} accepts connections but {reason}",
                "check that this is ZooKeeper's client port and that the server is healthy "
                "(it may have lost its quorum)",
            )
        ]
    return tree_problems(
        where,
        "--zookeeper",
        (ml, ledgers, clusters),
        ledgers_root=ledgers_root,
        cluster=cluster,
        managed_ledgers=managed_ledgers,
    )
