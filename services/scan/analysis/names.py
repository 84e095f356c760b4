"""Pulsar naming rules as Spark column expressions (no I/O)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

UNKNOWN_NAMESPACE = "(unknown)"


def ml_name_of_topic(topic: Column) -> Column:
    """`persistent://t/ns/local` → `t/ns/persistent/<url-encoded local>` (V1: t/c/ns/...).

    Mirrors TopicName: the text after the domain splits into at most 4 parts; 3 parts is a V2
    name, 4 a V1 name. `url_encode` is java.net.URLEncoder, as Pulsar's Codec.encode. Only
    persistent topics have managed ledgers; anything else yields null.
    """
    rest = F.regexp_extract(topic, r"^persistent://(.+)$", 1)
    parts = F.split(rest, "/", 4)
    v2 = F.concat_ws("/", parts[0], parts[1], F.lit("persistent"), F.url_encode(parts[2]))
    v1 = F.concat_ws("/", parts[0], parts[1], parts[2], F.lit("persistent"), F.url_encode(parts[3]))
    size = F.size(parts)
    return (
        F.when(rest == "", F.lit(None).cast("string"))
        .when(size == 3, v2)
        .when(size == 4, v1)
        .otherwise(F.lit(None).cast("string"))
    )


def namespace_of_ml(ml_name: Column) -> Column:
    """The namespace (`tenant/ns`, V1 `tenant/cluster/ns`) of a managed-ledger name."""
    parts = F.split(ml_name, "/")
    return (
        F.when(ml_name.isNull(), F.lit(None).cast("string"))
        .when(parts[2].isin("persistent", "non-persistent"), F.concat_ws("/", parts[0], parts[1]))
        .when(
            parts[3].isin("persistent", "non-persistent"),
            F.concat_ws("/", parts[0], parts[1], parts[2]),
        )
        .otherwise(F.concat_ws("/", parts[0], parts[1]))
    )


def namespace_of_schema(schema_id: Column) -> Column:
    """The namespace of a schema id (`tenant/ns/<base topic>`); V1 ids show `tenant/cluster`."""
    parts = F.split(schema_id, "/")
    return F.when(schema_id.isNull(), F.lit(None).cast("string")).otherwise(
        F.concat_ws("/", parts[0], parts[1])
    )


def namespace_of_schema_id(schema_id: Column) -> Column:
    """The namespace a schema id belongs to, V1 ids included: everything before the last `/`
    (`tenant/ns/<topic>` → `tenant/ns`, `tenant/cluster/ns/<topic>` → `tenant/cluster/ns`),
    as `services.metadata.namespaces.namespace_of_schema`."""
    return F.when(schema_id.contains("/"), F.regexp_extract(schema_id, r"^(.*)/[^/]*$", 1))
