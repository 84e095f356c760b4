"""Several Pulsar clusters on one BookKeeper: whose is a ledger nothing references?

Clusters sharing a BookKeeper (`initialize-cluster-metadata --existing-bk-metadata-service-uri`)
each keep their own metadata store over one ledgers root, so a neighbour's ledgers name
managed ledgers, cursors and schemas that do not exist here. "Its owner is gone" is evidence
only when the owner is missing in *every* cluster and its namespace exists here:
- references are global: a ledger any cluster's metadata names is referenced (the extract
  reads the declared neighbours' reference znodes into the same tables, tagged);
- `neighbour_owner`: its owner is absent here but exists in a declared neighbour;
- `unknown_namespace`: its owner's namespace has no policies here (a neighbour's namespace,
  declared or not, or one the operator names as deleted with `--deleted-namespace`);
- `replicated_undeclared`: it would be an orphan, but its namespace replicates to a cluster
  not declared: that cluster's ledger of the same topic name matches our owner's metadata
  (not for a ledger one of our lists names, nor an object naming our cluster: those are ours).
None of them is ever proposed, and none counts in the orphan share (as `other_cluster`
objects): they may be another cluster's data, and a run should not be refused for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from services.scan.schema import METADATA_CLUSTER

NEIGHBOUR_OWNER = "neighbour_owner"
UNKNOWN_NAMESPACE = "unknown_namespace"
REPLICATED_UNDECLARED = "replicated_undeclared"
#: Kinds that are (or may be) another cluster's data: never proposed, out of both sides of
#: the orphan share.
HELD_KINDS = (NEIGHBOUR_OWNER, UNKNOWN_NAMESPACE, REPLICATED_UNDECLARED)


@dataclass(frozen=True)
class Sharing:
    """What the analysis knows of the clusters sharing the ledgers root."""

    cluster: str
    declared: tuple[str, ...] = ()
    """Neighbours the extract read (`--shared-cluster`)."""
    namespaces_listed: bool = False
    """The extract read the namespace policies (an older extract did not: no namespace is
    then judged unknown, and the summary warns)."""
    deleted_namespaces: tuple[str, ...] = ()
    """Namespaces without policies that the operator names as deleted here."""


@dataclass(frozen=True)
class SharingFrames:
    sharing: Sharing
    neighbours: DataFrame
    """`owner_key` (`M:<ml>`, `S:<schema id>`) → `neighbour_cluster`, owners of declared
    neighbours."""
    namespaces: DataFrame
    """`owner_namespace`, `undeclared_replicas`, `namespace_known`."""


def ours(df: DataFrame) -> DataFrame:
    """Rows read from this cluster's metadata store."""
    return df.filter(F.col(METADATA_CLUSTER).isNull())


def theirs(df: DataFrame) -> DataFrame:
    return df.filter(F.col(METADATA_CLUSTER).isNotNull())


def neighbour_owners(managed_ledgers: DataFrame, schemas: DataFrame) -> DataFrame:
    """Owners that exist in a declared neighbour (the first neighbour by name)."""
    mls = theirs(managed_ledgers).select(
        F.concat(F.lit("M:"), "ml_name").alias("owner_key"), METADATA_CLUSTER
    )
    locators = theirs(schemas).select(
        F.concat(F.lit("S:"), "schema_id").alias("owner_key"), METADATA_CLUSTER
    )
    return (
        mls.unionByName(locators)
        .groupBy("owner_key")
        .agg(F.min(METADATA_CLUSTER).alias("neighbour_cluster"))
    )


def namespace_info(namespaces: DataFrame, sharing: Sharing) -> DataFrame:
    """Each namespace existing here, with the clusters it replicates to that are neither
    ours nor declared (null when its policies did not decode: the run refuses then)."""
    known = F.array(*[F.lit(c) for c in (sharing.cluster, *sharing.declared)])
    return (
        namespaces.groupBy("namespace")
        .agg(F.flatten(F.collect_list("replication_clusters")).alias("clusters"))
        .select(
            F.col("namespace").alias("owner_namespace"),
            F.array_sort(F.array_except("clusters", known)).alias("undeclared_replicas"),
            F.lit(True).alias("namespace_known"),
        )
    )


def frames(
    managed_ledgers: DataFrame, schemas: DataFrame, namespaces: DataFrame, sharing: Sharing
) -> SharingFrames:
    return SharingFrames(
        sharing, neighbour_owners(managed_ledgers, schemas), namespace_info(namespaces, sharing)
    )


def annotate(
    df: DataFrame, owner_key: Column, owner_namespace: Column, s: SharingFrames
) -> DataFrame:
    """Adds `owner_namespace`, `neighbour_cluster`, `undeclared_replicas`, `namespace_known`."""
    return (
        df.withColumn("owner_namespace", owner_namespace)
        .join(
            s.neighbours.withColumnRenamed("owner_key", "_nkey"),
            owner_key == F.col("_nkey"),
            "left",
        )
        .drop("_nkey")
        .join(s.namespaces, "owner_namespace", "left")
    )


def foreign_kind(owner_exists: Column, s: Sharing) -> Column:
    """`neighbour_owner` or `unknown_namespace` for a finding with an owner, else null."""
    neighbour = ~owner_exists & F.col("neighbour_cluster").isNotNull()
    deleted = (
        F.col("owner_namespace").isin(*s.deleted_namespaces)
        if s.deleted_namespaces
        else F.lit(False)
    )
    unknown = (
        F.lit(s.namespaces_listed)
        & F.col("owner_namespace").isNotNull()
        & ~F.coalesce(F.col("namespace_known"), F.lit(False))
        & ~deleted
    )
    return F.when(neighbour, NEIGHBOUR_OWNER).when(unknown, UNKNOWN_NAMESPACE)


def replicated_undeclared() -> Column:
    """The owner's namespace replicates to a cluster that is neither ours nor declared."""
    return F.coalesce(F.size("undeclared_replicas") > 0, F.lit(False))
