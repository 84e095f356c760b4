"""One extract task at a time, without Spark: what a unit reads, and how it reports failure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, OrphanPlan
from devstack.zookeeper import ZooKeeperServer
from services.metadata import ZkMetadataStore
from services.metadata.namespaces import POLICIES_ROOT
from services.scan.extract.rows import Row
from services.scan.extract.units import (
    BK,
    BUCKET,
    INVENTORY,
    ML,
    NAMESPACES,
    Unit,
    plan_units,
    run_unit,
)
from tests.scan import sim

SPEC = ClusterSpec(seed=31, tenants=1, namespaces_per_tenant=1, orphans=OrphanPlan.some(1))


def _by_table(rows: list[tuple[str, Row]]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for table, row in rows:
        out.setdefault(table, []).append(row)
    return out


def _without_dates(rows: list[Row]) -> list[tuple[tuple[str, object], ...]]:
    """Rows comparable across sources (the inventory file here carries no dates)."""
    return sorted(
        tuple(sorted((k, v) for k, v in r.items() if k != "last_modified_ms")) for r in rows
    )


async def test_inventory_unit_reads_what_the_listing_reads(
    zk: ZooKeeperServer, s3: S3Server, tmp_path: Path
) -> None:
    """An inventory CSV of the bucket gives the same object rows (user metadata by HEAD) as
    the live listing; rows of other buckets in the file are ignored."""
    await sim.write(zk, s3, SPEC)
    settings = sim.settings(zk, s3, SPEC)
    listed = _by_table(await run_unit(Unit(BUCKET, SPEC.bucket), settings))["offload_objects"]
    lines = [f'"{r["bucket"]}","{r["key"]}","{r["size"]}",""' for r in listed]
    lines.append('"elsewhere","x-ledger-1","1",""')
    inventory = tmp_path / "inv.csv"
    inventory.write_text("\n".join(lines) + "\n")
    unit = Unit(INVENTORY, str(inventory))
    rows = _by_table(await run_unit(unit, replace(settings, inventories=(str(inventory),))))
    assert _without_dates(listed) == _without_dates(rows["offload_objects"])
    assert [m["status"] for m in rows["scan_manifest"]] == ["ok"]


async def test_missing_bucket_fails_its_task(zk: ZooKeeperServer, s3: S3Server) -> None:
    """A bucket that does not exist: no object rows, a failed manifest row naming it."""
    rows = _by_table(await run_unit(Unit(BUCKET, "no-such-bucket"), sim.settings(zk, s3, SPEC)))
    manifest = rows["scan_manifest"][0]
    assert ("offload_objects" in rows, manifest["status"]) == (False, "failed")
    assert "no-such-bucket" in manifest["error"]


async def test_undecodable_znodes_are_rows_with_decode_error(
    zk: ZooKeeperServer, s3: S3Server
) -> None:
    """A garbled ledger znode and a garbled ML znode are still rows, with `decode_error`."""
    async with ZkMetadataStore.connect(zk.address) as store:
        await store.create("/ledgers/00/0000/L0042", b"garbage", make_parents=True)
        await store.create("/managed-ledgers/t/ns/persistent/x", b"\xff\xff", make_parents=True)
    settings = sim.settings(zk, s3, SPEC)
    ledgers = _by_table(await run_unit(Unit(BK, "00/0000"), settings))["bk_ledgers"]
    mls = _by_table(await run_unit(Unit(ML, "t/ns"), settings))["managed_ledgers"]
    assert [(r["ledger_id"], r["decode_error"] is not None) for r in ledgers] == [(42, True)]
    assert [(r["ml_name"], r["decode_error"] is not None) for r in mls] == [
        ("t/ns/persistent/x", True)
    ]


async def test_stopped_zookeeper_fails_the_driver_listing(
    zk: ZooKeeperServer, s3: S3Server
) -> None:
    """With ZooKeeper down from the start, every listing is a failed manifest row (the object
    listing needs no ZooKeeper and is ok). The namespace policies unit is planned anyway:
    it reads the configuration store, which may be another ZooKeeper, and fails as a task."""
    zk.stop()
    units, rows, _ = await plan_units(sim.settings(zk, s3, SPEC, zk_timeout_s=1.0))
    statuses = {r["kind"]: r["status"] for r in rows}
    assert statuses == {
        "bk_ledgers": "failed",
        "managed_ledgers": "failed",
        "schemas": "failed",
        "offload_objects": "ok",
    }
    assert units == [Unit(NAMESPACES, POLICIES_ROOT), Unit(BUCKET, SPEC.bucket)]
