"""Findings whose owner names are not canonical are reported, never proposed for deletion.

Every name a candidate carries (the owner a ledger's custom metadata names, the ML an
object's user metadata or a listing names, a cursor, a schema id) becomes a PDLI field. One
that is not in the form Pulsar writes (`services.metadata.pulsar_names`: no empty, `.` or
`..` segment, no escaped separator, URLEncoder's exact encoding) could alias another owner,
so such a finding keeps its place in the report with kind `noncanonical_name` and the
problem, and is not deletable. The check is Python (the one implementation of the rules),
so it runs on the distinct owner names of the deletable findings only (the orphans, a small
share of all rows), read from the findings once they are written: in the common case where
every name is canonical, the findings are written once and never touched again.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.types import StringType

from services.core.errors import InvalidArgument
from services.metadata.pulsar_names import (
    check_cursor_name,
    check_managed_ledger_name,
    check_schema_id,
)
from services.scan.analysis.candidates import deletable

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


@arrow_udf(StringType())  # type: ignore[call-overload,untyped-decorator]
def _problems(component: pa.Array, ml: pa.Array, cursor: pa.Array, schema: pa.Array) -> pa.Array:
    """`owner_name_problem` of each row of an Arrow batch (null where the names are fine).

    The names are taken from the Arrow arrays in one step per column: through pandas,
    reading them cell by cell (`Series.iat`, tens of µs a cell on Arrow-backed strings)
    cost several times the checks themselves."""
    names = [column.to_pylist() for column in (component, ml, cursor, schema)]
    return pa.array([owner_name_problem(*row) for row in zip(*names, strict=True)], pa.string())


def unchecked(findings: DataFrame) -> DataFrame:
    """`findings` with the `name_problem` column, empty: the names are checked once the
    findings are written (`name_problems`, `reject_noncanonical`)."""
    return findings.withColumn("name_problem", F.lit(None).cast("string"))


_NAME_COLUMNS = ("_component", "_ml_name", "_cursor_name", "_schema_id")


def _names(findings: DataFrame, component: Column) -> list[Column]:
    """The owner names a finding's PDLI would carry, as strings, in `_problems`' order."""
    cursor = F.col("cursor_name") if "cursor_name" in findings.columns else F.lit(None)
    schema = F.col("schema_id") if "schema_id" in findings.columns else F.lit(None)
    return [
        name.cast("string").alias(alias)
        for name, alias in zip(
            (component, F.col("ml_name"), cursor, schema), _NAME_COLUMNS, strict=True
        )
    ]


def name_problems(findings: DataFrame, component: Column) -> DataFrame:
    """The distinct owner names of the deletable `findings` that are not canonical, with
    their problem (`_component`, `_ml_name`, `_cursor_name`, `_schema_id`, `name_problem`).

    Read from the written findings, this is a scan of five columns and a Python call per
    distinct owner of an orphan. Evaluated beside the classification instead, Spark's
    Python operator queued every finding's whole row while the names went to Python and
    back: about a quarter of a ten-million-ledger analysis, for a few hundred thousand
    deletable rows."""
    names = deletable(findings).select(*_names(findings, component)).distinct()
    columns = [F.col(c) for c in _NAME_COLUMNS]
    return names.withColumn("name_problem", _problems(*columns)).filter(
        F.col("name_problem").isNotNull()
    )


def reject_noncanonical(findings: DataFrame, problems: DataFrame, component: Column) -> DataFrame:
    """`findings` (from `unchecked`) with the `problems` of `name_problems` applied: a
    deletable finding whose names are among them becomes kind `noncanonical_name`, not
    deletable, its problem in `name_problem`. The problems are few (broadcast); the names
    match null-safely (an absent cursor or schema id is part of the name)."""
    was_deletable = F.coalesce(F.col("deletable"), F.lit(False))
    keyed = findings.drop("name_problem").select("*", *_names(findings, component))
    same = [keyed[c].eqNullSafe(F.col(f"p{c}")) for c in _NAME_COLUMNS]
    renamed = problems.select(*[F.col(c).alias(f"p{c}") for c in _NAME_COLUMNS], "name_problem")
    joined = keyed.join(F.broadcast(renamed), same, "left")
    problem = F.when(was_deletable, F.col("name_problem"))
    bad = problem.isNotNull()
    replaced = {
        "kind": F.when(bad, F.lit(NONCANONICAL)).otherwise(F.col("kind")),
        "deletable": F.when(bad, F.lit(False)).otherwise(F.col("deletable")),
        "name_problem": problem,
    }
    return joined.select(*[replaced.get(c, F.col(c)).alias(c) for c in findings.columns])


def check_names(findings: DataFrame, component: Column) -> DataFrame:
    """`name_problems` and `reject_noncanonical` of `findings` in one plan (which computes
    the findings twice: for findings in memory; the job checks the written ones)."""
    return reject_noncanonical(findings, name_problems(findings, component), component)
