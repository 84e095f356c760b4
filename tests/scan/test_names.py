"""The namespace of a managed-ledger name or schema id, as a Spark column, on odd names too.

Names come from ledger custom metadata and object metadata, so any string may reach these
expressions: they must give the namespace rule's answer (first two segments, or three when
the fourth, not the third, is the domain) and never fail the job. The well-formed names are
the two forms of Pulsar's `TopicName.getPersistenceNamingEncoding` (V2
`tenant/ns/persistent/topic`, V1 `tenant/cluster/ns/persistent/topic`).
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from services.scan.analysis.names import namespace_of_ml, namespace_of_schema

#: (name, namespace_of_ml, namespace_of_schema)
CASES: list[tuple[str | None, str | None, str | None]] = [
    (None, None, None),
    ("", "", ""),
    ("a", "a", "a"),
    ("a/", "a/", "a/"),
    ("/", "/", "/"),
    ("a/b", "a/b", "a/b"),
    ("a/b/c", "a/b", "a/b"),
    ("a/b/c/d", "a/b", "a/b"),
    ("tenant-1/ns-1/persistent/topic-1", "tenant-1/ns-1", "tenant-1/ns-1"),
    ("a/b/non-persistent/t", "a/b", "a/b"),
    ("a/b/persistent", "a/b", "a/b"),
    ("t/c/ns/persistent/x", "t/c/ns", "t/c"),
    ("t/c/ns/non-persistent/x", "t/c/ns", "t/c"),
    ("t/c/ns/persistent", "t/c/ns", "t/c"),
    ("t/c/ns/persistent/x/y", "t/c/ns", "t/c"),
    # The third segment wins over the fourth.
    ("a/b/persistent/persistent/t", "a/b", "a/b"),
    ("a/persistent/b/persistent/t", "a/persistent/b", "a/persistent"),
    # Only the exact domain segment counts.
    ("a/b/persistentx/t", "a/b", "a/b"),
    ("a/b/c/persistentx/t", "a/b", "a/b"),
    ("a/b/Persistent/t", "a/b", "a/b"),
    ("a/b/c/d/persistent/t", "a/b", "a/b"),
    ("a/b/c/persistent\n", "a/b", "a/b"),
    ("a\nb/c/persistent/t", "a\nb/c", "a\nb/c"),
    ("a//persistent/t", "a/", "a/"),
    ("//x/persistent/t", "//x", "/"),
    ("é/ü/c/persistent/%2F", "é/ü/c", "é/ü"),
]


def test_namespaces_of_names(spark: SparkSession) -> None:
    """Every case gives the rule's namespace; short names (fewer segments than the rule looks
    at) give their first segments, not an out-of-bounds error."""
    frame = spark.createDataFrame([(name,) for name, _, _ in CASES], "name string")
    rows = frame.select(
        "name",
        namespace_of_ml(F.col("name")).alias("ml"),
        namespace_of_schema(F.col("name")).alias("schema"),
    ).collect()
    assert [(r["name"], r["ml"], r["schema"]) for r in rows] == CASES
