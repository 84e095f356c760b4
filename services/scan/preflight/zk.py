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
import socket
from collections.abc import Iterator

from services.core.shared_clusters import StoreUrl
from services.core.zk_security import ZooKeeperRefused, ZooKeeperSecurity
from services.metadata import (
    MANAGED_LEDGERS_ROOT,
    MetadataError,
    NoNode,
    StoreUnavailable,
    ZkMetadataStore,
)
from services.scan.preflight.problems import Problem

#: Where Pulsar registers its clusters (`ClusterResources`, configuration store): one child
#: per cluster, holding its `ClusterData` JSON.
CLUSTERS_ROOT = "/admin/clusters"
DEFAULT_PORT = 2181
DEFAULT_TIMEOUT_S = 10.0
"""Each step of the check when the caller gives no timeout: the TCP connect to each server,
opening the session, the few reads together. The extract's own `--zk-timeout` default, so
the pre-flight refuses no store the run itself would wait for (a loaded ZooKeeper, or a
loaded host running the check, can take seconds to answer)."""
MIN_SESSION_TIMEOUT_S = 4.0
"""ZooKeeper's session timeout is at least twice its tick (2 s by default)."""

FIX_ADDRESS = "start ZooKeeper there or fix --zookeeper"
BOOKKEEPER_OPTION = "--bookkeeper-metadata"


def servers(connect_string: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` (a `/chroot` suffix ignored) as (host, port) pairs."""
    pairs = []
    for item in connect_string.split("/", 1)[0].split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or host.endswith(":"):  # no port, or bare IPv6
            host, port = item, str(DEFAULT_PORT)
        pairs.append((host.strip("[]"), int(port)))
    return pairs


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _reach(host: str, port: int, timeout_s: float) -> Problem | None:
    """None when a TCP connection opens within `timeout_s`; else why not."""
    address = _address(host, port)
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        return Problem(
            f"ZooKeeper {address}: connection refused (nothing listens there)", FIX_ADDRESS
        )
    except TimeoutError:
        return Problem(
            f"ZooKeeper {address}: no answer within {timeout_s:g} s (host down, "
            "unreachable or filtered)",
            "check the host, the network and firewalls, or fix --zookeeper",
        )
    except socket.gaierror as e:
        return Problem(f"ZooKeeper {address}: unknown host ({e.strerror})", "fix --zookeeper")
    except OSError as e:
        return Problem(f"ZooKeeper {address}: cannot connect ({e.strerror or e})", FIX_ADDRESS)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
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
    configuration_store: str | None = None,
    bookkeeper_store: StoreUrl | None = None,
    security: ZooKeeperSecurity | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Problem]:
    """Every problem found with the metadata store (and, when they are stores of their own,
    BookKeeper's store and the configuration store); [] when the extract can read them and
    the cluster is known. `bookkeeper_store`: where the ledgers root is when it is not the
    metadata store. `security`: the sessions' authentication and TLS
    (`TOMBSTONE_ZOOKEEPER_*`); `timeout_s`: each step's time (connect, session, reads), the
    run's `--zk-timeout`."""
    secured = security or ZooKeeperSecurity()
    local_cluster = cluster if configuration_store is None else None
    if bookkeeper_store is None:
        checks = [
            _check_store(connect_string, chroot, ledgers_root, local_cluster, secured, timeout_s)
        ]
    else:
        checks = [
            _check_store(connect_string, chroot, None, local_cluster, secured, timeout_s),
            _check_bookkeeper_store(bookkeeper_store, ledgers_root, secured, timeout_s),
        ]
    if configuration_store is not None:
        config_hosts, _, config_chroot = configuration_store.partition("/")
        checks.append(
            _check_configuration_store(
                config_hosts,
                f"/{config_chroot}" if config_chroot else None,
                cluster,
                secured,
                timeout_s,
            )
        )
    found = await asyncio.gather(*checks)
    return [problem for problems in found for problem in problems]


async def _check_bookkeeper_store(
    store: StoreUrl, ledgers_root: str, security: ZooKeeperSecurity, timeout_s: float
) -> list[Problem]:
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
    connect_string: str,
    chroot: str | None,
    cluster: str,
    security: ZooKeeperSecurity,
    timeout_s: float,
) -> list[Problem]:
    return await _reach_then_check(
        "--configuration-store", connect_string, chroot, None, cluster, security, timeout_s
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
    reached = await asyncio.gather(*(_reach(host, port, timeout_s) for host, port in pairs))
    up = [_address(h, p) for (h, p), problem in zip(pairs, reached, strict=True) if not problem]
    if not up:
        return [problem for problem in reached if problem is not None]
    with _quiet("aiozk"):
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
                    _exists(store, MANAGED_LEDGERS_ROOT if managed_ledgers else None),
                    _exists(store, ledgers_root),
                    _children(store, CLUSTERS_ROOT if cluster is not None else None),
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
    problems = []
    fix_tree = "check --zookeeper and --chroot: this is not the Pulsar metadata store"
    fix_root = "fix --chroot"
    store_kind = "metadata store"
    if not managed_ledgers and ledgers_root is not None:  # BookKeeper's store alone
        fix_root = f"fix {BOOKKEEPER_OPTION}"
    elif not managed_ledgers:  # the configuration store alone
        store_kind = "configuration store"
        fix_tree = "check --configuration-store: this is not Pulsar's configuration store"
    elif ml is None:
        problems.append(Problem(f"{MANAGED_LEDGERS_ROOT} missing in {where}", fix_tree))
    if ledgers_root is not None and ledgers is None:
        problems.append(
            Problem(
                f"--ledgers-root {ledgers_root} missing in {where}",
                "give the BookKeeper ledgers root (the path of the brokers' "
                f"bookkeeperMetadataServiceUri, default /ledgers) or {fix_root}",
            )
        )
    if cluster is None:
        pass
    elif clusters is None:
        problems.append(
            Problem(
                f"{CLUSTERS_ROOT} missing in {where}: no Pulsar cluster is registered there",
                fix_tree,
            )
        )
    elif cluster not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        problems.append(
            Problem(
                f"--cluster {cluster}: not a cluster of this {store_kind} (known: {known})",
                "give the brokers' clusterName with --cluster",
            )
        )
    return problems


async def _exists(store: ZkMetadataStore, path: str | None) -> object:
    """The znode's stat (None: absent); `True` when there is nothing to check."""
    if path is None:
        return True
    return await store.exists(path)


async def _children(store: ZkMetadataStore, path: str | None) -> list[str] | None:
    if path is None:
        return []
    try:
        return await store.get_children(path)
    except NoNode:
        return None
