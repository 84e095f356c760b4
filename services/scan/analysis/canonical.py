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

import pyarrow as pa
import pyarrow.compute as pc
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
def _problems(
    deletable: pa.Array, component: pa.Array, ml: pa.Array, cursor: pa.Array, schema: pa.Array
) -> pa.Array:
    """`owner_name_problem` of each deletable row of an Arrow batch, null for the others.

    Only deletable rows are checked: they are a small share of the batch, and the Python
    call per row is what the check costs. Their names are taken from the Arrow arrays in one
    step per column, and a batch without a deletable row is answered without a Python object
    per row: through pandas, reading names cell by cell (`Series.iat`, tens of µs a cell on
    Arrow-backed strings) and building each batch's answer cost several times the checks
    themselves, over a minute of CPU for ten million ledgers."""
    rows = pc.indices_nonzero(pc.fill_null(deletable, False))
    if len(rows) == 0:
        return pa.nulls(len(deletable), pa.string())
    problems: list[str | None] = [None] * len(deletable)
    names = [pc.take(column, rows).to_pylist() for column in (component, ml, cursor, schema)]
    for i, row in zip(rows.to_pylist(), zip(*names, strict=True), strict=True):
        problems[i] = owner_name_problem(*row)
    return pa.array(problems, type=pa.string())


def reject_noncanonical(findings: DataFrame, component: Column) -> DataFrame:
    """`findings` with a `name_problem` column; deletable findings whose names are not
    canonical become kind `noncanonical_name`, not deletable.

    One pass over the findings: splitting them into deletable and not and taking the union
    would compute the classification behind them (its joins and aggregations) twice. The
    names go to Python only for deletable rows (null otherwise), so the Arrow batches of the
    rest carry little more than the flag."""
    deletable = F.coalesce(F.col("deletable"), F.lit(False))
    cursor = F.col("cursor_name") if "cursor_name" in findings.columns else F.lit(None)
    schema = F.col("schema_id") if "schema_id" in findings.columns else F.lit(None)
    names = [
        F.when(deletable, name.cast("string"))
        for name in (component, F.col("ml_name"), cursor, schema)
    ]
    checked = findings.withColumn("name_problem", _problems(deletable, *names))
    bad = F.col("name_problem").isNotNull()
    return checked.withColumn(
        "kind", F.when(bad, NONCANONICAL).otherwise(F.col("kind"))
    ).withColumn("deletable", F.when(bad, F.lit(False)).otherwise(F.col("deletable")))
