"""What the pre-flight checks in any metadata store, ZooKeeper or Oxia: a TCP connect to each
server (so "refused", "no answer" and "unknown host" are told apart) and what the reads of
the Pulsar roots say is wrong."""

from __future__ import annotations

import asyncio
import contextlib
import socket

from services.metadata import MANAGED_LEDGERS_ROOT, MetadataStore, NoNode
from services.scan.preflight.problems import Problem

#: Where Pulsar registers its clusters (`ClusterResources`, configuration store): one child
#: per cluster, holding its `ClusterData` JSON.
CLUSTERS_ROOT = "/admin/clusters"
DEFAULT_PORT = 2181
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


def address_of(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def reach(
    host: str, port: int, timeout_s: float, *, what: str = "ZooKeeper", option: str = "--zookeeper"
) -> Problem | None:
    """None when a TCP connection opens within `timeout_s`; else why not (`what` at
    `option`: the store's kind and the option that named its address)."""
    address = address_of(host, port)
    fix_address = FIX_ADDRESS if option == "--zookeeper" else f"start {what} there or fix {option}"
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, port)
    except ConnectionRefusedError:
        return Problem(f"{what} {address}: connection refused (nothing listens there)", fix_address)
    except TimeoutError:
        return Problem(
            f"{what} {address}: no answer within {timeout_s:g} s (host down, "
            "unreachable or filtered)",
            f"check the host, the network and firewalls, or fix {option}",
        )
    except socket.gaierror as e:
        return Problem(f"{what} {address}: unknown host ({e.strerror})", f"fix {option}")
    except OSError as e:
        return Problem(f"{what} {address}: cannot connect ({e.strerror or e})", fix_address)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


def tree_problems(
    where: str,
    option: str,
    found: tuple[object, object, list[str] | None],
    *,
    ledgers_root: str | None,
    cluster: str | None,
    managed_ledgers: bool,
) -> list[Problem]:
    """What the reads of `/managed-ledgers`, the ledgers root and the registered clusters
    (`found`, None where absent) say is wrong with the store `option` names."""
    ml, ledgers, clusters = found
    problems = []
    if option == "--zookeeper":
        fix_tree = "check --zookeeper and --chroot: this is not the Pulsar metadata store"
        fix_root = "fix --chroot"
    else:
        fix_tree = f"check {option}: this is not the Pulsar metadata store"
        fix_root = f"fix {option}"
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


async def exists_or_true(store: MetadataStore, path: str | None) -> object:
    """The znode's stat (None: absent); `True` when there is nothing to check."""
    if path is None:
        return True
    return await store.exists(path)


async def children_or_none(store: MetadataStore, path: str | None) -> list[str] | None:
    if path is None:
        return []
    try:
        return await store.get_children(path)
    except NoNode:
        return None
