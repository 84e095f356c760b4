"""The extract task that lists the namespaces existing here: one row per namespace policies
znode of the configuration store, with the clusters it replicates to.

The walk is Pulsar's own (`TenantResources.getListOfNamespacesAsync`): below
`/admin/policies/<tenant>`, a child that has children is a V1 cluster directory and each of
its children is a namespace `tenant/cluster/ns`; a child without children is a V2 namespace
`tenant/ns` when its znode holds `Policies` (an empty one is what a deleted V1 namespace
leaves of its cluster directory). A znode gone between the listing and the read is skipped;
policies that do not decode are a row with `decode_error` (the namespace exists, where it
replicates is unknown, and the analysis refuses).
"""

from __future__ import annotations

from services.core.errors import CorruptData
from services.metadata import MetadataStore, NoNode
from services.metadata.namespaces import POLICIES_ROOT, decode_policies
from services.scan.extract import tasks as T
from services.scan.extract.rows import Row


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return sorted(await store.get_children(path))
    except NoNode:
        return []


def _row(namespace: str, data: bytes, path: str) -> Row:
    try:
        policies = decode_policies(data, path=path)
    except CorruptData as e:
        return {"namespace": namespace, "replication_clusters": None, "decode_error": str(e)}
    clusters = list(policies.replication_clusters)
    return {"namespace": namespace, "replication_clusters": clusters, "decode_error": None}


async def read_namespaces(store: MetadataStore, out: T.Out, limits: T.ReadLimits) -> int:
    """Append a `namespaces` row per namespace policies znode; returns the row count."""
    before = len(out)
    keys = [
        (tenant, key)
        for tenant in await _children(store, POLICIES_ROOT)
        for key in await _children(store, f"{POLICIES_ROOT}/{tenant}")
    ]

    async def read(item: tuple[str, str]) -> None:
        tenant, key = item
        path = f"{POLICIES_ROOT}/{tenant}/{key}"
        nested = await _children(store, path)
        if not nested:
            await _read_one(store, f"{tenant}/{key}", out, skip_empty=True)
            return
        # One after the other inside this slot: the task keeps its `concurrency` bound.
        for ns in nested:
            await _read_one(store, f"{tenant}/{key}/{ns}", out, skip_empty=False)

    await T.bounded(keys, read, limits.concurrency)
    return len(out) - before


async def _read_one(store: MetadataStore, namespace: str, out: T.Out, *, skip_empty: bool) -> None:
    path = f"{POLICIES_ROOT}/{namespace}"
    try:
        node = await store.get(path)
    except NoNode:
        return
    if skip_empty and not node.data:
        return
    out.append(("namespaces", _row(namespace, node.data, path)))
