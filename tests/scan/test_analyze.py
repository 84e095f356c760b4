"""Classification of the planted extract: every kind, and every look-alike left alone."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from services.scan.analysis import references as R
from services.scan.analysis.candidates import deletion_candidates
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import Analysis, analyze
from services.scan.schema import Extract, extract_from_rows
from tests.scan import planted as P


@pytest.fixture(scope="module")
def extract(spark: SparkSession) -> Extract:
    return extract_from_rows(spark, P.planted_rows())


@pytest.fixture(scope="module")
def analysis(extract: Extract) -> Analysis:
    config = AnalyzeConfig(cluster=P.CLUSTER)
    result = analyze(extract, config, now_ms=P.NOW)
    return Analysis(
        result.ledger_findings.cache(),
        result.object_findings.cache(),
        result.dormant_topics,
        result.inactive_cursors,
    )


def test_every_planted_ledger_gets_its_kind(analysis: Analysis) -> None:
    """Each planted ledger is classified exactly as expected, both id layouts included."""
    rows = analysis.ledger_findings.select(
        "ledger_id", "kind", "orphan_reason", "deletable"
    ).collect()
    assert sorted(P.EXPECTED_LEDGERS) == sorted(tuple(r) for r in rows)


def test_every_planted_object_gets_its_kind(analysis: Analysis) -> None:
    """Objects match on (uuid, ledger id); an abandoned upload of a listed ledger is orphaned."""
    rows = analysis.object_findings.select("key", "kind", "deletable").collect()
    assert sorted(tuple(r) for r in rows) == P.EXPECTED_OBJECTS


def test_abandoned_upload_is_marked_as_of_a_listed_ledger(analysis: Analysis) -> None:
    """The report says the orphaned objects' ledger is still listed (with another uuid)."""
    rows = (
        analysis.object_findings.filter(F.col("uuid") == P.U0)
        .select("ledger_listed", "ml_name")
        .distinct()
        .collect()
    )
    assert [tuple(r) for r in rows] == [(True, P.OFFL)]


def test_references_name_every_source(extract: Extract) -> None:
    """Shadow lists, cursors, compacted and bucket properties and locators are references."""
    deleted = R.bk_deleted_times(extract.managed_ledgers, extract.ml_ledgers)
    refs = R.ledger_references(
        R.reference_rows(extract.ml_ledgers, extract.cursors, extract.schemas, deleted)
    )
    expected = {
        10: ["ml_list"],
        20: ["ml_list"],
        30: ["ml_list_bookkeeper_deleted"],
        31: ["ml_list"],
        32: ["ml_list_bookkeeper_deleted"],
        33: ["ml_list", "ml_list_bookkeeper_deleted"],
        40: ["compacted"],
        50: ["cursor"],
        60: ["schema_locator"],
        70: ["cursor"],
        72: ["cursor"],
        73: ["compacted"],
        74: ["cursor"],
        76: ["compacted"],
        P.LONG + 1: ["ml_list"],
        P.LONG + 54: ["delayed_bucket"],
    }
    rows = refs.select("ledger_id", R.ref_names(F.col("ref_bits")).alias("refs")).collect()
    assert {i: ",".join(names) for i, names in expected.items()} == {
        r["ledger_id"]: r["refs"] for r in rows
    }


def test_candidates_are_pdli_shaped_per_tier(analysis: Analysis) -> None:
    """Deletable ledgers become LEDGER candidates, each orphan upload one OFFLOAD_LEDGER.

    The upload whose index object is still young (U7) is held back with its old data object.
    """
    candidates = deletion_candidates(analysis.ledger_findings, analysis.object_findings)
    actual = candidates.select("ledger_type", "ledger_id", "component", "uuid", "kind")
    expected = sorted(
        [
            ("LEDGER", 30, "MANAGED_LEDGER", None, "bk_copy_after_offload"),
            ("LEDGER", 51, "MANAGED_CURSOR", None, "cursor_moved_on"),
            ("LEDGER", 52, "MANAGED_CURSOR", None, "cursor_moved_on"),
            ("LEDGER", 53, "MANAGED_CURSOR", None, "cursor_moved_on"),
            ("LEDGER", 102, "MANAGED_LEDGER", None, "not_in_list"),
            ("LEDGER", 61, "SCHEMA_STORAGE", None, "schema_not_in_locator"),
            ("LEDGER", 62, "SCHEMA_STORAGE", None, "schema_not_in_locator"),
            ("LEDGER", 100, "MANAGED_LEDGER", None, "topic_gone"),
            ("LEDGER", 103, "MANAGED_LEDGER", None, "topic_gone"),
            ("LEDGER", P.LONG + 104, "MANAGED_LEDGER", None, "not_in_list"),
            ("LEDGER", 39, "COMPACTED_LEDGER", None, "compacted_unreferenced"),
            ("LEDGER", 41, "COMPACTED_LEDGER", None, "compacted_unreferenced"),
            ("LEDGER", 42, "COMPACTED_LEDGER", None, "compacted_unreferenced"),
            ("LEDGER", 43, "COMPACTED_LEDGER", None, "topic_gone"),
            ("LEDGER", 75, "COMPACTED_LEDGER", None, "compacted_unreferenced"),
            ("LEDGER", P.LONG + 55, "DELAYED_INDEX_BUCKET", None, "bucket_unreferenced"),
            ("LEDGER", P.LONG + 56, "DELAYED_INDEX_BUCKET", None, "bucket_unreferenced"),
            ("LEDGER", P.LONG + 57, "DELAYED_INDEX_BUCKET", None, "topic_gone"),
            ("OFFLOAD_LEDGER", 31, "MANAGED_LEDGER", P.U0, "offload_no_match"),
            ("OFFLOAD_LEDGER", P.LONG + 500, "MANAGED_LEDGER", P.U9, "offload_no_match"),
        ],
        key=str,
    )
    assert expected == sorted((tuple(r) for r in actual.collect()), key=str)


def test_offload_candidate_lists_both_object_keys(analysis: Analysis) -> None:
    """An offload candidate carries the data and the index key of its upload."""
    candidates = deletion_candidates(analysis.ledger_findings, analysis.object_findings)
    row = candidates.filter(F.col("uuid") == P.U0).select("bucket", "object_keys").first()
    assert row is not None
    assert ("b1", [f"{P.U0}-ledger-31", f"{P.U0}-ledger-31-index"]) == tuple(row)


def test_namespaces_come_from_the_owner(analysis: Analysis) -> None:
    """Orphans are attributed to their owner's namespace (ML name or schema id)."""
    rows = analysis.ledger_findings.filter("deletable").select("ledger_id", "namespace").collect()
    expected = {
        30: "public/default",
        51: "public/default",
        52: "public/default",
        53: "public/default",
        61: "public/default",
        62: "public/default",
        100: "public/default",
        102: "public/default",
        103: "public/default",
        P.LONG + 104: "public/default",
        **dict.fromkeys(P.CURSOR_OWNED_PROPOSED, "t2/ns2"),
    }
    assert expected == {r["ledger_id"]: r["namespace"] for r in rows}


def test_cursor_owned_candidates_name_their_cursor(analysis: Analysis) -> None:
    """A compacted ledger's candidate names its topic's ML and `__compaction`; a bucket's the
    ML and the subscription's cursor znode name, encoded as `Codec.encode` does (`my sub` →
    `my+sub`), deleted topics included."""
    candidates = deletion_candidates(analysis.ledger_findings, analysis.object_findings)
    rows = candidates.filter(
        F.col("component").isin("COMPACTED_LEDGER", "DELAYED_INDEX_BUCKET")
    ).select("ledger_id", "ml_name", "cursor_name")
    compaction = "__compaction"
    expected = {
        39: (P.COMPACTED, compaction),
        41: (P.COMPACTED, compaction),
        42: (P.COMPACTED, compaction),
        43: (P.COMPACTED_GONE, compaction),
        75: (P.COMPACTING3, compaction),
        P.LONG + 55: (P.DELAYED, "sub1"),
        P.LONG + 56: (P.DELAYED, "my+sub"),
        P.LONG + 57: (P.DELAYED_GONE, "sub1"),
    }
    assert expected == {r["ledger_id"]: (r["ml_name"], r["cursor_name"]) for r in rows.collect()}


def test_objects_without_owner_metadata(spark: SparkSession) -> None:
    """Objects written before Pulsar 2.10 carry neither `managedledgername` nor
    `pulsarclustername` (`BlobStoreManagedLedgerOffloader.addVersionInfo` set only the
    version keys). Listed with their uuid by a Pulsar 2.1 context (no driver metadata, no
    bucket) they are referenced; of a ledger listed with another uuid they are proposed under
    that ML; of a ledger no ML lists they name no owner: `unknown_ownership`, never proposed."""
    rows = P.planted_rows()
    legacy = {"managed_ledger_name": None, "cluster_name": None}
    rows["offload_objects"] = [
        *P.pair(P.U2, 31, **legacy),
        *P.pair(P.U0, 31, **legacy),
        *P.pair(P.U9, 901, **legacy),
    ]
    for row in rows["ml_ledgers"]:
        if row.get("offload_uuid") == P.U2:
            row.update(offload_driver_name=None, offload_bucket=None, offload_driver_metadata={})
    result = analyze(extract_from_rows(spark, rows), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW)
    found = {
        (r.uuid, r.kind, r.deletable, r.ml_name)
        for r in result.object_findings.select("uuid", "kind", "deletable", "ml_name").collect()
    }
    assert found == {
        (P.U2, "referenced", False, P.OFFL),
        (P.U0, "offload_no_match", True, P.OFFL),
        (P.U9, "unknown_ownership", False, None),
    }
