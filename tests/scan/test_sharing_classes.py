"""The sharing kinds on a planted extract (no ZooKeeper): offloaded objects and V1 schema
namespaces, which the simulated world does not exercise. Rows tagged `metadata_cluster`
stand for what the extract reads from a declared neighbour's store; `namespaces` rows for
`NamespaceResources`' policies znodes (`Policies.replication_clusters`)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import analyze
from services.scan.schema import extract_from_rows
from tests.scan import planted as P

EAST = "east"
THEIR_ML = "east-1/ns/persistent/t"  # only in the neighbour
BOTH_ML = "public/default/persistent/both"  # in both clusters, listed by neither
U3 = "33333333-3333-3333-3333-333333333333"
U4 = "44444444-4444-4444-4444-444444444444"
U5 = "55555555-5555-5555-5555-555555555555"


def _rows(*, declared: bool) -> dict[str, list[P.Row]]:
    rows = P.planted_rows()
    rows["managed_ledgers"] += [P.ml(BOTH_ML)]
    if declared:
        rows["scan_run"][0]["shared_clusters"] = [EAST]
        rows["managed_ledgers"] += [
            P.ml(THEIR_ML, metadata_cluster=EAST),
            P.ml(BOTH_ML, metadata_cluster=EAST),
        ]
        # The neighbour lists its upload U3 of ledger 700.
        rows["ml_ledgers"] += [
            P.listed(THEIR_ML, 700, 0, metadata_cluster=EAST, **P.offloaded(U3, bk_deleted=True))
        ]
    rows["offload_objects"] += [
        *P.pair(U3, 700, managed_ledger_name=THEIR_ML, cluster_name=P.CLUSTER),
        *P.pair(U4, 701, managed_ledger_name=THEIR_ML, cluster_name=P.CLUSTER),
        *P.pair(U5, 702, managed_ledger_name=BOTH_ML, cluster_name=P.CLUSTER),
    ]
    # A V1 schema id `tenant/cluster/ns/topic`: its namespace is `t1/c1/ns1`, which exists.
    rows["bk_ledgers"] += [P.bk(710, component="schema", schema_id="t1/c1/ns1/topic")]
    rows["namespaces"] += [P.namespace("t1/c1/ns1")]
    # Property-owned ledgers of topics this cluster does not have: the neighbour's compacted
    # topic, and a bucket of a namespace without policies here.
    rows["bk_ledgers"] += [
        P.compacted(711, THEIR_ML),
        P.bucket(712, "nowhere/ns/persistent/t", "sub"),
    ]
    return rows


def _objects(spark: SparkSession, rows: dict[str, list[P.Row]]) -> dict[int, Any]:
    analysis = analyze(
        extract_from_rows(spark, rows), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW
    )
    found = {
        r["ledger_id"]: (r["kind"], r["deletable"])
        for r in analysis.object_findings.collect()
        if r["ledger_id"] in (700, 701, 702)
    }
    for ledger in analysis.ledger_findings.filter("ledger_id in (710, 711, 712)").collect():
        found[ledger["ledger_id"]] = (ledger["kind"], ledger["deletable"])
    return found


@pytest.mark.parametrize("declared", [False, True])
def test_objects_and_v1_schemas(spark: SparkSession, declared: bool) -> None:
    """Undeclared: objects of the neighbour's namespace are `unknown_namespace`. Declared:
    its listed upload is referenced, its unlisted one is `neighbour_owner`. An upload of a
    topic both clusters have and neither lists is proposed either way; a V1 schema ledger
    is judged in its own namespace. A compacted ledger or bucket whose topic is absent here
    is set apart as any owner's ledger is, before it could be `topic_gone`."""
    found = _objects(spark, _rows(declared=declared))
    expected = {
        700: ("referenced", False) if declared else ("unknown_namespace", False),
        701: ("neighbour_owner", False) if declared else ("unknown_namespace", False),
        702: ("offload_no_match", True),
        710: ("schema_not_in_locator", True),
        711: ("neighbour_owner", False) if declared else ("unknown_namespace", False),
        712: ("unknown_namespace", False),
    }
    assert found == expected


GEO = "geo/ns/persistent/t"  # ours, in a namespace replicated to an undeclared cluster
U6 = "66666666-6666-6666-6666-666666666666"
UA = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"


def test_replicated_namespace_holds_back_only_what_may_be_theirs(spark: SparkSession) -> None:
    """`geo/ns` replicates to `north`, not declared: an unlisted ledger of our topic and an
    upload naming no cluster are `replicated_undeclared`; a ledger our list names as
    `bookkeeperDeleted` and an upload naming our cluster are ours, and proposed. An
    unreferenced compacted ledger of our topic may be the other cluster's too."""
    rows = P.planted_rows()
    rows["namespaces"] += [P.namespace("geo/ns", "north")]
    rows["managed_ledgers"] += [P.ml(GEO, mtime=P.OLD)]
    rows["ml_ledgers"] += [P.listed(GEO, 720, 0, **P.offloaded(U6, bk_deleted=True))]
    rows["bk_ledgers"] += [P.data(720, GEO), P.data(721, GEO), P.compacted(724, GEO)]
    rows["offload_objects"] += [
        *P.pair(UA, 722, managed_ledger_name=GEO, cluster_name=P.CLUSTER),
        *P.pair(UA, 723, managed_ledger_name=GEO, cluster_name=None),
    ]
    analysis = analyze(
        extract_from_rows(spark, rows), AnalyzeConfig(cluster=P.CLUSTER), now_ms=P.NOW
    )
    ledgers = {
        r["ledger_id"]: (r["kind"], r["orphan_reason"], r["deletable"])
        for r in analysis.ledger_findings.filter("ledger_id in (720, 721, 724)").collect()
    }
    objects = {
        (r["ledger_id"], r["kind"], r["deletable"])
        for r in analysis.object_findings.filter("ledger_id in (722, 723)").collect()
    }
    assert ledgers == {
        720: ("bk_copy_after_offload", "bk_copy_after_offload", True),
        721: ("replicated_undeclared", "not_in_list", False),
        724: ("replicated_undeclared", "compacted_unreferenced", False),
    }
    assert objects == {(722, "offload_no_match", True), (723, "replicated_undeclared", False)}
