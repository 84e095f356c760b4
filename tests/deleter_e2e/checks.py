"""What must hold after the deleter ran: S1 (nothing referenced deleted) and L1 (nothing
orphaned), read from the real ZooKeeper and S3."""

from __future__ import annotations

import boto3

from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZooKeeperServer
from services.metadata import LedgerPaths, ManagedLedgers, Schemas
from tests.deleter.stack import BUCKET
from tests.store_kinds import StoreKind, open_store


def objects_in_s3(s3: S3Server) -> set[str]:
    return set(object_sizes_in_s3(s3))


def object_sizes_in_s3(s3: S3Server) -> dict[str, int]:
    """Every object's key and size (bytes) in the offload bucket."""
    client = boto3.client("s3", **s3.client_config())
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return {item["Key"]: item["Size"] for page in pages for item in page.get("Contents", [])}


async def ledgers_in_zookeeper(zk: ZooKeeperServer | StoreKind, ids: set[int]) -> set[int]:
    paths = LedgerPaths()
    async with open_store(zk) as store:
        return {i for i in ids if await store.exists(paths.ledger_path(i)) is not None}


async def listed_now(
    zk: ZooKeeperServer | StoreKind, model: ClusterModel
) -> tuple[set[int], set[str]]:
    """Ledger ids every ML lists now, and the object keys of their offload contexts."""
    ids: set[int] = set()
    keys: set[str] = set()
    async with open_store(zk) as store:
        mls = ManagedLedgers(store)
        for name in model.managed_ledgers:
            info = (await mls.read(name)).value
            for entry in info.ledgerInfo:
                ids.add(entry.ledgerId)
    for obj in model.objects.values():
        if obj.ledger_id in ids:
            keys.add(obj.key)
    return ids, keys


async def cursor_and_schema_ledgers_now(
    zk: ZooKeeperServer | StoreKind, model: ClusterModel
) -> set[int]:
    """Ledger ids the cursor znodes and schema locators reference now."""
    ids: set[int] = set()
    async with open_store(zk) as store:
        mls, schemas = ManagedLedgers(store), Schemas(store)
        for ml_name, name in model.cursors:
            cursor = (await mls.read_cursor(ml_name, name)).value
            if cursor.cursorsLedgerId >= 0:
                ids.add(cursor.cursorsLedgerId)
        for schema_id in model.schemas:
            locator = (await schemas.read(schema_id)).value
            ids.update(entry.position.ledgerId for entry in locator.index)
            ids.add(locator.info.position.ledgerId)
    return ids


def cursor_and_schema_ledgers(model: ClusterModel) -> set[int]:
    ids = {c.cursors_ledger_id for c in model.cursors.values() if c.cursors_ledger_id >= 0}
    for schema in model.schemas.values():
        ids.update(schema.ledger_ids)
    return ids


async def assert_safe(
    zk: ZooKeeperServer | StoreKind, s3: S3Server, model: ClusterModel, objects_before: set[str]
) -> tuple[set[int], set[str]]:
    """S1: every ledger still referenced (ML list, cursor, schema) is in ZooKeeper, and every
    object of a listed ledger is in S3. Returns the listed ids and the objects present."""
    listed, listed_keys = await listed_now(zk, model)
    kept = (listed | cursor_and_schema_ledgers(model)) & {
        led.ledger_id for led in model.bookkeeper_ledgers()
    }
    assert kept == await ledgers_in_zookeeper(zk, kept)
    remaining = objects_in_s3(s3)
    assert set() == listed_keys - remaining
    assert remaining <= objects_before
    return listed, remaining


async def assert_all_gone(
    zk: ZooKeeperServer | StoreKind,
    s3: S3Server,
    model: ClusterModel,
    marked: dict[int, set[int]],
    listed: set[int],
) -> None:
    """L1: every ledger unlinked by the marker is gone from ZooKeeper and S3."""
    from tombstone.v1 import pending_delete_pb2 as _pd

    assert set() == await ledgers_in_zookeeper(zk, marked[_pd.LEDGER] - listed)
    unlinked = marked[_pd.OFFLOAD_LEDGER] - listed
    gone = {o.key for o in model.objects.values() if o.ledger_id in unlinked}
    assert set() == objects_in_s3(s3) & gone
