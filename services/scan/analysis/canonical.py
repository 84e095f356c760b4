"""Findings whose owner names are not canonical are reported, never proposed for deletion.

Every name a candidate carries (the owner a ledger's custom metadata names, the ML an
object's user metadata or a listing names, a cursor, a schema id) becomes a PDLI field. One
that is not in the form Pulsar writes (`services.metadata.pulsar_names`: no empty, `.` or
`..` segment, no escaped separator, URLEncoder's exact encoding) could alias another owner,
so such a finding keeps its place in the report with kind `noncanonical_name` and the
problem, and is not deletable. The check is Python (the one implementation of the rules),
so it runs on the deletable findings only: the orphans, a small share of all rows.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from services.core.errors import InvalidArgument
from services.metadata.pulsar_names import (
    check_cursor_name,
    check_managed_ledger_name,
    check_schema_id,
)

NONCANONICAL = "noncanonical_name"
#: Components whose owner is a cursor znode, so whose PDLI names a cursor.
CURSOR_OWNED = ("MANAGED_CURSOR", "COMPACTED_LEDGER", "DELAYED_INDEX_BUCKET")


def owner_name_problem(
    component: str | None, ml_name: str | None, cursor_name: str | None, schema_id: str | None
) -> str | None:
    """Why the owner names of a candidate of `component` are not canonical, or None.

    A name that is absent is not checked here (whether a candidate without one may be
    proposed is decided elsewhere); a present one must be canonical.
    """
    try:
        if component == "SCHEMA_STORAGE":
            if schema_id is not None:
                check_schema_id(schema_id)
            return None
        if ml_name is not None:
            check_managed_ledger_name(ml_name)
        if component in CURSOR_OWNED and cursor_name is not None:
            check_cursor_name(cursor_name)
    except InvalidArgument as e:
        return str(e)
    return None


# A lambda: PySpark inspects a function's type hints to guess a pandas UDF and warns.
_problem = F.udf(lambda c, m, k, s: owner_name_problem(c, m, k, s), StringType())


def reject_noncanonical(findings: DataFrame, component: Column) -> DataFrame:
    """`findings` with a `name_problem` column; deletable findings whose names are not
    canonical become kind `noncanonical_name`, not deletable."""
    deletable = F.coalesce(F.col("deletable"), F.lit(False))
    kept = findings.filter(~deletable).withColumn("name_problem", F.lit(None).cast("string"))
    cursor = F.col("cursor_name") if "cursor_name" in findings.columns else F.lit(None)
    schema = F.col("schema_id") if "schema_id" in findings.columns else F.lit(None)
    checked = findings.filter(deletable).withColumn(
        "name_problem",
        _problem(component, F.col("ml_name"), cursor.cast("string"), schema.cast("string")),
    )
    bad = F.col("name_problem").isNotNull()
    checked = checked.withColumn("kind", F.when(bad, NONCANONICAL).otherwise(F.col("kind")))
    checked = checked.withColumn("deletable", ~bad)
    return kept.unionByName(checked)
