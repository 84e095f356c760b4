"""A simulated cluster in the real ZooKeeper and moto S3, extracted and analysed for real."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from devstack.s3 import S3Server
from devstack.simulator import ClusterModel, ClusterSpec, OrphanKind
from devstack.simulator.run import simulate_into
from devstack.zookeeper import ZooKeeperServer
from services.core.shared_clusters import OXIA, StoreUrl
from services.scan.analysis.config import AnalyzeConfig
from services.scan.analysis.job import AnalysisOutcome, run_analysis
from services.scan.extract.job import ExtractOutcome, run_extract
from services.scan.extract.s3 import S3Settings
from services.scan.extract.units import ExtractSettings, Unit
from tests.store_kinds import StoreKind

CLUSTER = "standalone"

#: The analysis kind each planted kind must be found as.
LEDGER_KINDS = {
    OrphanKind.UNLISTED_DATA: "not_in_list",
    OrphanKind.DELETED_TOPIC: "topic_gone",
    OrphanKind.STALE_CURSOR: "cursor_moved_on",
    OrphanKind.UNLISTED_SCHEMA: "schema_not_in_locator",
    OrphanKind.BK_AFTER_OFFLOAD: "bk_copy_after_offload",
    # An OPEN rollover ledger of an existing topic is in use before it is even too young.
    OrphanKind.YOUNG: "in_use_open",
    OrphanKind.NO_PULSAR_METADATA: "unknown_ownership",
    OrphanKind.SHADOW_REFERENCED: "referenced",
    # Legacy artifacts: an unsubscribed cursor's OPEN ledger is an orphan once old (the OPEN
    # rule); the listed legacy ledgers are referenced, whatever metadata they lack.
    OrphanKind.OPEN_CURSOR_UNSUBSCRIBED: "cursor_moved_on",
    OrphanKind.PRE_2_2_LEDGER: "referenced",
    OrphanKind.OFFLOAD_2_1: "referenced",
    OrphanKind.OBJECTS_PRE_2_10: "referenced",
}
OBJECT_KINDS = {
    OrphanKind.UNREFERENCED_OFFLOAD: "offload_no_match",
    OrphanKind.OTHER_CLUSTER_OBJECTS: "other_cluster",
    # Listed with the same uuid: referenced, with or without owner metadata or driverMetadata.
    OrphanKind.OFFLOAD_2_1: "referenced",
    OrphanKind.OBJECTS_PRE_2_10: "referenced",
}


def settings(zk: ZooKeeperServer, s3: S3Server, spec: ClusterSpec, **kw: Any) -> ExtractSettings:
    return settings_at(zk.address, s3, spec, **kw)


def settings_at(zookeeper: str, s3: S3Server, spec: ClusterSpec, **kw: Any) -> ExtractSettings:
    config = s3.client_config()
    s3_settings = S3Settings(
        endpoint_url=config["endpoint_url"],
        region=config["region_name"],
        access_key_id=config["aws_access_key_id"],
        secret_access_key=config["aws_secret_access_key"],
    )
    base = ExtractSettings(
        zookeeper=zookeeper,
        cluster=CLUSTER,
        buckets=(spec.bucket,),
        s3=s3_settings,
        zk_timeout_s=2.0,
    )
    return replace(base, **kw)


def settings_on(store: StoreKind, s3: S3Server, spec: ClusterSpec) -> ExtractSettings:
    """`settings` for the store of a test on both stores: the session's ZooKeeper, or the
    Oxia namespace holding Pulsar's and BookKeeper's metadata."""
    if store.zk is not None:
        return settings(store.zk, s3, spec)
    url = StoreUrl(OXIA, store.address, "default")
    return settings_at("", s3, spec, metadata_store=url)


async def write(zk: ZooKeeperServer, s3: S3Server, spec: ClusterSpec) -> ClusterModel:
    return await simulate_into(spec, zookeeper=zk.address, s3_config=s3.client_config())


def window_config(model: ClusterModel, extract: ExtractOutcome) -> AnalyzeConfig:
    """An age window that splits exactly the simulator's old and young znodes (scan start is
    "now"): old ones are at least `window` old, young ones less."""
    assert model.young_since_ms is not None
    window = extract.started_ms - model.young_since_ms + 1
    return AnalyzeConfig(
        cluster=CLUSTER,
        min_age=timedelta(milliseconds=window),
        allow_short_min_age=True,
        max_orphan_share=1.0,
    )


@dataclass
class Scanned:
    model: ClusterModel
    extract: ExtractOutcome
    analysis: AnalysisOutcome


async def extract_and_analyze(
    spark: SparkSession,
    tmp: Path,
    model: ClusterModel,
    extract_settings: ExtractSettings,
    after_listing: Any = None,
) -> Scanned:
    extract = await asyncio.to_thread(
        run_extract, spark, extract_settings, tmp / "extract", after_listing=after_listing
    )
    config = window_config(model, extract)
    analysis = await asyncio.to_thread(run_analysis, spark, tmp / "extract", tmp / "out", config)
    return Scanned(model, extract, analysis)


def findings(spark: SparkSession, out: Path, what: str, key: str) -> dict[Any, tuple[str, bool]]:
    rows = spark.read.parquet(str(out / "findings" / what)).collect()
    return {row[key]: (row["kind"], row["deletable"]) for row in rows}


def no_hook(_units: list[Unit]) -> None:
    return None
