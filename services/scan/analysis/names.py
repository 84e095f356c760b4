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


#: One path segment; `\z` is the very end (`$` would also match before a final newline).
_SEGMENT = r"[^/]*"
_DOMAIN = r"/(?:non-)?persistent(?:/|\z)"
#: A V1 name: its fourth segment is the domain and its third is not.
_V1_NAMESPACE = rf"^(?!{_SEGMENT}/{_SEGMENT}{_DOMAIN})({_SEGMENT}/{_SEGMENT}/{_SEGMENT}){_DOMAIN}"


def namespace_of_ml(ml_name: Column) -> Column:
    """The namespace (`tenant/ns`, V1 `tenant/cluster/ns`) of a managed-ledger name.

    The first two segments, or the first three when the fourth, not the third, is the
    domain (`persistent` or `non-persistent`). One regular expression, compiled once per
    task, and a plain cut at the second `/`: splitting the name into an array for each
    segment looked at made the classification's generated code too large for the JIT and
    split every name up to eight times, and a second regular expression for the first two
    segments cost more than the cut (the owner namespace is computed for every ledger;
    `tests/scan/test_names.py` holds the cases)."""
    v1 = F.regexp_extract(ml_name, _V1_NAMESPACE, 1)
    return F.when(v1 != "", v1).otherwise(_first_two(ml_name))


def _first_two(name: Column) -> Column:
    """The first two segments (fewer when the name has fewer): everything before the second
    `/`, or the whole name."""
    return F.substring_index(name, "/", 2)


def namespace_of_schema(schema_id: Column) -> Column:
    """The namespace of a schema id (`tenant/ns/<base topic>`); V1 ids show `tenant/cluster`."""
    return _first_two(schema_id)


def namespace_of_schema_id(schema_id: Column) -> Column:
    """The namespace a schema id belongs to, V1 ids included: everything before the last `/`
    (`tenant/ns/<topic>` → `tenant/ns`, `tenant/cluster/ns/<topic>` → `tenant/cluster/ns`),
    as `services.metadata.namespaces.namespace_of_schema`."""
    return F.when(schema_id.contains("/"), F.regexp_extract(schema_id, r"^(.*)/[^/]*$", 1))
