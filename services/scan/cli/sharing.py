"""Options about other Pulsar clusters on this BookKeeper: `--shared-cluster` (extract, run)
and `--deleted-namespace` (analyze, run), checked before any work (exit 2 when malformed)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import click

from services.core.config import CONFIGURATION_STORE, SHARED_CLUSTERS
from services.core.errors import TombstoneError
from services.core.metadata_stores import (
    BOOKKEEPER_METADATA_URL,
    METADATA_STORE_URL,
    parse_bookkeeper_url,
)
from services.core.shared_clusters import (
    ZOOKEEPER,
    SharedCluster,
    StoreUrl,
    parse_shared_clusters,
)
from services.core.shared_clusters import parse_store_url as _parse_store_url
from services.metadata.pulsar_names import check_named_entity
from services.scan.cli.errors import UsageProblem

F = Callable[..., Any]


def shared_cluster_option(func: F) -> F:
    return click.option(
        "--shared-cluster",
        "shared_cluster",
        multiple=True,
        metavar="NAME=URL",
        help="Another Pulsar cluster sharing this BookKeeper's ledgers root (repeatable): its "
        "name and metadata store, URL zk:host:port[,host:port...][/chroot], "
        "host:port[,...][/chroot] or oxia://host:port[/namespace]. Its managed ledgers, "
        "cursors and schemas are read too: what it references or owns is never proposed. Default: "
        "TOMBSTONE_SHARED_CLUSTERS (white-space separated NAME=URL entries).",
    )(func)


def deleted_namespace_option(func: F) -> F:
    return click.option(
        "--deleted-namespace",
        "deleted_namespace",
        multiple=True,
        metavar="TENANT/NS",
        help="A namespace without policies here that was deleted in THIS cluster, as "
        "TENANT/NS or TENANT/CLUSTER/NS (repeatable): its unreferenced ledgers and objects "
        "may then be proposed instead of being set apart as unknown_namespace. Risky: if "
        "another cluster sharing this BookKeeper has a namespace of that name and is not "
        "declared with --shared-cluster, its data is proposed (the report's banner says so).",
    )(func)


def shared_clusters(values: Sequence[str], cluster: str) -> tuple[SharedCluster, ...]:
    """The declared neighbours: the options, else TOMBSTONE_SHARED_CLUSTERS."""
    try:
        if values:
            declared = parse_shared_clusters(" ".join(values))
        else:
            declared = SHARED_CLUSTERS.read(os.environ)
    except TombstoneError as exc:  # the environment's value (ConfigError names the variable)
        raise UsageProblem(str(exc)) from None
    except ValueError as exc:
        raise UsageProblem(f"--shared-cluster: {exc}") from None
    for shared in declared:
        if shared.name == cluster:
            raise UsageProblem(f"--shared-cluster {shared.name}: that is --cluster itself")
    return declared


def configuration_store(raw: str | None) -> StoreUrl | None:
    """`--configuration-store` (else TOMBSTONE_CONFIGURATION_STORE) checked: a ZooKeeper
    (`host:port[,...][/chroot]`) or an Oxia namespace; None: the metadata store holds the
    configuration too."""
    try:
        if raw is None:
            env = CONFIGURATION_STORE.read(os.environ)
            if env is None:
                return None
            store = env
        else:
            store = _parse_store_url(raw)
    except TombstoneError as exc:  # the environment's value (ConfigError names the variable)
        raise UsageProblem(str(exc)) from None
    except ValueError as exc:
        raise UsageProblem(f"--configuration-store: {exc}") from None
    return store


def metadata_store(raw: str | None, zookeeper: str | None, chroot: str | None) -> StoreUrl:
    """Pulsar's metadata store: `--zookeeper` under `--chroot`, or `--metadata-store` (else
    TOMBSTONE_METADATA_STORE_URL) in Pulsar's URL forms; exactly one of them."""
    try:
        url = METADATA_STORE_URL.read(os.environ) if raw is None else _parse_store_url(raw)
    except TombstoneError as exc:  # the environment's value (ConfigError names the variable)
        raise UsageProblem(str(exc)) from None
    except ValueError as exc:
        raise UsageProblem(f"--metadata-store: {exc}") from None
    named = "--metadata-store" if raw is not None else METADATA_STORE_URL.name
    if url is None:
        if not zookeeper:
            raise UsageProblem(f"give --zookeeper (with --chroot) or --metadata-store (or {named})")
        return StoreUrl(ZOOKEEPER, zookeeper, chroot or "")
    if zookeeper or chroot:
        # Two options naming Pulsar's store: which one the operator meant is unknown.
        raise UsageProblem(
            f"{named} names Pulsar's metadata store, and so does --zookeeper/--chroot: give one"
        )
    return url


def bookkeeper_store(raw: str | None, ours: StoreUrl) -> StoreUrl | None:
    """`--bookkeeper-metadata` (else TOMBSTONE_BOOKKEEPER_METADATA_URL) checked; None when
    BookKeeper's metadata is in `ours` (Pulsar's metadata store)."""
    try:
        if raw is None:
            store = BOOKKEEPER_METADATA_URL.read(os.environ)
        else:
            store = parse_bookkeeper_url(raw)
    except TombstoneError as exc:  # the environment's value (ConfigError names the variable)
        raise UsageProblem(str(exc)) from None
    except ValueError as exc:
        raise UsageProblem(f"--bookkeeper-metadata: {exc}") from None
    if store is None or store == ours:
        return None
    return store


def deleted_namespaces(values: Sequence[str]) -> tuple[str, ...]:
    """Each `tenant/ns` or `tenant/cluster/ns`, in Pulsar's naming rules."""
    checked = []
    for value in values:
        parts = value.split("/")
        if len(parts) not in (2, 3):
            raise UsageProblem(
                f"--deleted-namespace {value!r}: expected TENANT/NS or TENANT/CLUSTER/NS"
            )
        try:
            for part in parts:
                check_named_entity(part, "namespace")
        except TombstoneError as exc:
            raise UsageProblem(f"--deleted-namespace {value!r}: {exc}") from None
        checked.append(value)
    return tuple(sorted(set(checked)))


def warn_deleted_namespaces(namespaces: Sequence[str]) -> None:
    if namespaces:
        click.secho(
            f"WARNING: --deleted-namespace {', '.join(namespaces)}: their ledgers may be "
            "proposed; if a cluster sharing this BookKeeper has such a namespace and is not "
            "declared with --shared-cluster, its data is proposed.",
            fg="red",
            bold=True,
            err=True,
        )
