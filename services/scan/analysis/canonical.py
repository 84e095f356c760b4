"""Findings whose owner names are not canonical are reported, never proposed for deletion.

Every name a candidate carries (the owner a ledger's custom metadata names, the ML an
object's user metadata or a listing names, a cursor, a schema id) becomes a PDLI field. One
that is not in the form Pulsar writes (`services.metadata.pulsar_names`: no empty, `.` or
`..` segment, no escaped separator, URLEncoder's exact encoding) could alias another owner,
so such a finding keeps its place in the report with kind `noncanonical_name` and the
problem, and is not deletable. The check is Python (the one implementation of the rules),
so it runs on the driver, on the distinct owner names of the deletable findings only (the
orphans, a small share of all rows), read from the findings once they are written: in the
common case where every name is canonical, the findings are written once and never touched
again. Names made only of characters that need no encoding (`PLAIN_ML_NAME`,
`PLAIN_CURSOR_NAME`) are canonical by construction and are not sent to Python
(`tests/scan/test_canonical.py` holds every name of those forms to the Python checks).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from services.core.errors import InvalidArgument
from services.metadata.pulsar_names import (
    check_cursor_name,
    check_managed_ledger_name,
    check_schema_id,
)
from services.scan.analysis.candidates import deletable

NONCANONICAL = "noncanonical_name"

# A segment of letters, digits, `_`, `-` and `.` that is not `.` or `..`: a valid named
# entity, and a local name URLEncoder writes unchanged. Java regular expressions (`\z`:
# the very end; `$` would also match before a final line break).
_PLAIN_ENTITY = r"(?!\.\.?/)[A-Za-z0-9_.-]{1,255}"
#: A managed ledger name that is canonical by construction: `tenant/ns/persistent/local`.
PLAIN_ML_NAME = (
    rf"^{_PLAIN_ENTITY}/{_PLAIN_ENTITY}/persistent/(?!\.\.?\z)[A-Za-z0-9_.-]{{1,2048}}\z"
)
#: A cursor name that is canonical by construction.
PLAIN_CURSOR_NAME = r"^(?!\.\.?\z)[A-Za-z0-9_.-]{1,255}\z"
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


def unchecked(findings: DataFrame) -> DataFrame:
    """`findings` with the `name_problem` column, empty: the names are checked once the
    findings are written (`name_problems`, `reject_noncanonical`)."""
    return findings.withColumn("name_problem", F.lit(None).cast("string"))


_NAME_COLUMNS = ("_component", "_ml_name", "_cursor_name", "_schema_id")
#: The rows of `name_problems`: the owner names (in `owner_name_problem`'s order) and why.
NameProblem = tuple[str | None, str | None, str | None, str | None, str]
PROBLEM_SCHEMA = ", ".join(f"{column} string" for column in (*_NAME_COLUMNS, "name_problem"))


def _names(findings: DataFrame, component: Column) -> list[Column]:
    """The owner names a finding's PDLI would carry, as strings, in `owner_name_problem`'s
    order."""
    cursor = F.col("cursor_name") if "cursor_name" in findings.columns else F.lit(None)
    schema = F.col("schema_id") if "schema_id" in findings.columns else F.lit(None)
    return [
        name.cast("string").alias(alias)
        for name, alias in zip(
            (component, F.col("ml_name"), cursor, schema), _NAME_COLUMNS, strict=True
        )
    ]


def plainly_canonical(component: Column, ml_name: Column, cursor_name: Column) -> Column:
    """True when the owner names a candidate of `component` carries are canonical by their
    form alone (`PLAIN_ML_NAME`, `PLAIN_CURSOR_NAME`); false or null when Python must check
    them (a schema id always goes to Python: its partition rule needs the decoded name)."""
    cursor_owned = component.isin(*CURSOR_OWNED)
    return (
        (component != "SCHEMA_STORAGE")
        & (ml_name.isNull() | ml_name.rlike(PLAIN_ML_NAME))
        & (~cursor_owned | cursor_name.isNull() | cursor_name.rlike(PLAIN_CURSOR_NAME))
    )


def name_problems(findings: DataFrame, component: Column) -> list[NameProblem]:
    """The distinct owner names of the deletable `findings` that are not canonical, with
    their problem (one Spark job).

    Read from the written findings, this is a scan of five columns. Only the distinct
    owners whose names are not plainly canonical (`plainly_canonical`) reach Python, on the
    driver: usually few or none (at ten million ledgers, checking every distinct owner of an
    orphan in a Python worker cost about three seconds). Evaluated beside the
    classification instead, Spark's Python operator queued every finding's whole row while
    the names went to Python and back."""
    named = deletable(findings).select(*_names(findings, component))
    plain = plainly_canonical(*[F.col(c) for c in _NAME_COLUMNS[:3]])
    owners = named.filter(~F.coalesce(plain, F.lit(False))).distinct().collect()
    problems: list[NameProblem] = []
    for owner in owners:
        component_name, ml_name, cursor_name, schema_id = owner
        problem = owner_name_problem(component_name, ml_name, cursor_name, schema_id)
        if problem is not None:
            problems.append((component_name, ml_name, cursor_name, schema_id, problem))
    return problems


def problems_frame(spark: SparkSession, problems: list[NameProblem]) -> DataFrame:
    """The `name_problems` as the DataFrame `reject_noncanonical` joins."""
    return spark.createDataFrame(problems, PROBLEM_SCHEMA)


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
    """`name_problems` and `reject_noncanonical` of `findings` (which computes the findings
    twice: for findings in memory; the job checks the written ones)."""
    problems = problems_frame(findings.sparkSession, name_problems(findings, component))
    return reject_noncanonical(findings, problems, component)
