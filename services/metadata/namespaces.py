"""Pulsar's namespace policies: whether a namespace exists in this cluster, and where it
replicates.

Pulsar keeps each namespace's `Policies` as JSON at `/admin/policies/<tenant>/<namespace>`
(V1 names: `/admin/policies/<tenant>/<cluster>/<namespace>`) in the configuration store
(`NamespaceResources`, `BASE_POLICIES_PATH`), and each tenant's `TenantInfo` at
`/admin/policies/<tenant>`. A namespace with no policies znode does not exist here: its topics
belong to another cluster (one sharing our BookKeeper) or to a namespace already deleted.
`replication_clusters` (Jackson's name of `Policies.replication_clusters`) lists the
clusters the namespace is geo-replicated to; a replicated namespace has the same topic names
in each of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from services.core.errors import CorruptData
from services.metadata.pulsar_names import check_managed_ledger_name, check_schema_id

POLICIES_ROOT = "/admin/policies"


@dataclass(frozen=True, slots=True)
class NamespacePolicies:
    """The part of `Policies` Tombstone reads."""

    replication_clusters: tuple[str, ...] = ()
    deleted: bool = False
    """Set by Pulsar before 2.10 while the namespace is being deleted."""


def namespace_of_ml(ml_name: str) -> str:
    """`tenant/ns` (or `tenant/cluster/ns`) of a canonical ML name."""
    return check_managed_ledger_name(ml_name).rsplit("/", 2)[0]


def namespace_of_schema(schema_id: str) -> str:
    """`tenant/ns` (or `tenant/cluster/ns`) of a canonical schema id."""
    return check_schema_id(schema_id).rsplit("/", 1)[0]


def policies_path(namespace: str) -> str:
    """`/admin/policies/<namespace>` (the namespace already canonical)."""
    return f"{POLICIES_ROOT}/{namespace}"


def decode_policies(data: bytes, *, path: str) -> NamespacePolicies:
    """The namespace's policies; `CorruptData` when the znode is not Pulsar's JSON."""
    try:
        doc = json.loads(data.decode("utf-8")) if data else {}
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptData(f"{path}: namespace policies are not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise CorruptData(f"{path}: namespace policies are not a JSON object")
    clusters = doc.get("replication_clusters") or []
    if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
        raise CorruptData(f"{path}: replication_clusters is not a list of names")
    return NamespacePolicies(tuple(sorted(set(clusters))), bool(doc.get("deleted", False)))


def encode_policies(replication_clusters: tuple[str, ...] | list[str]) -> bytes:
    """A new namespace's `Policies` as Pulsar's Jackson mapper writes it (the fields a fresh
    `NamespacesBase.internalCreateNamespace` sets; the rest are null and left out)."""
    policies = {
        "auth_policies": {
            "namespace_auth": {},
            "destination_auth": {},
            "subscription_auth_roles": {},
        },
        "replication_clusters": sorted(set(replication_clusters)),
        "bundles": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1},
        "backlog_quota_map": {},
        "clusterDispatchRate": {},
        "topicDispatchRate": {},
        "subscriptionDispatchRate": {},
        "replicatorDispatchRate": {},
        "clusterSubscribeRate": {},
        "publishMaxMessageRate": {},
        "latency_stats_sample_rate": {},
        "deleted": False,
        "encryption_required": False,
        "subscription_auth_mode": "None",
        "is_allow_auto_update_schema": True,
        "schema_validation_enforced": False,
        "properties": {},
    }
    return json.dumps(policies, separators=(",", ":")).encode("utf-8")
