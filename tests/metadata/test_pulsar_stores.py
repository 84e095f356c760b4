"""ManagedLedgers and Schemas against the real ZooKeeper."""

from __future__ import annotations

import pytest

from services.metadata import (
    CompressionType,
    CorruptMetadata,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    ManagedLedgers,
    NoNode,
    SchemaLocator,
    Schemas,
    VersionConflict,
    ZkMetadataStore,
)

ML = "t/ns/persistent/my+topic"


def info(*ledger_ids: int) -> ManagedLedgerInfo:
    result = ManagedLedgerInfo()
    for ledger_id in ledger_ids:
        result.ledgerInfo.add(ledgerId=ledger_id, entries=1, size=10, timestamp=1)
    return result


async def test_new_ml_is_empty_at_version_0(store: ZkMetadataStore) -> None:
    """A new ML znode (0 bytes) reads as an empty ManagedLedgerInfo at version 0."""
    mls = ManagedLedgers(store)
    await mls.create(ML)
    record = await mls.read(ML)
    assert (ManagedLedgerInfo(), 0, "/managed-ledgers/" + ML) == (
        record.value,
        record.version,
        record.path,
    )
    assert (await store.get("/managed-ledgers/" + ML)).data == b""


async def test_ml_write_is_compare_and_set(store: ZkMetadataStore) -> None:
    """Writes succeed at the current version and conflict at a stale one."""
    mls = ManagedLedgers(store)
    await mls.create(ML)
    assert await mls.write(ML, info(1, 2), version=0) == 1
    with pytest.raises(VersionConflict) as err:
        await mls.write(ML, info(3), version=0)
    assert err.value.path == "/managed-ledgers/" + ML
    assert info(1, 2) == (await mls.read(ML)).value


async def test_compressed_ml_round_trip(store: ZkMetadataStore) -> None:
    """With a compression type the znode holds the 0x4778 frame and reads back the same."""
    mls = ManagedLedgers(store, compression=CompressionType.ZSTD)
    await mls.create(ML, info(*range(100)))
    assert (await store.get("/managed-ledgers/" + ML)).data[:2] == b"\x47\x78"
    assert info(*range(100)) == (await mls.read(ML)).value


async def test_missing_ml_is_no_node(store: ZkMetadataStore) -> None:
    """A topic without an ML znode raises NoNode."""
    with pytest.raises(NoNode):
        await ManagedLedgers(store).read(ML)


async def test_corrupt_ml_names_the_path(store: ZkMetadataStore) -> None:
    """Garbage in an ML znode raises CorruptMetadata naming it."""
    await store.create("/managed-ledgers/" + ML, b"\x47\x78\x00", make_parents=True)
    with pytest.raises(CorruptMetadata) as err:
        await ManagedLedgers(store).read(ML)
    assert err.value.path == "/managed-ledgers/" + ML


async def test_listing_tenants_namespaces_topics(store: ZkMetadataStore) -> None:
    """Listing walks tenants, namespaces and topics, V1 names included."""
    mls = ManagedLedgers(store)
    names = [
        "a/ns1/persistent/x",
        "a/ns1/persistent/y",
        "a/ns2/persistent/z",
        "b/c1/ns/persistent/v",
    ]
    for name in names:
        await mls.create(name)
    assert await mls.tenants() == ["a", "b"]
    assert await mls.namespaces("a") == ["ns1", "ns2"]
    assert await mls.topics("a", "ns1") == ["x", "y"]
    assert sorted(names) == sorted([n async for n in mls.managed_ledger_names()])


async def test_listing_empty_store(store: ZkMetadataStore) -> None:
    """Without /managed-ledgers there are no tenants and no topics."""
    mls = ManagedLedgers(store)
    assert (await mls.tenants(), await mls.topics("a", "ns")) == ([], [])


async def test_cursors(store: ZkMetadataStore) -> None:
    """Cursor znodes are the ML's children; they read and write with CAS."""
    mls = ManagedLedgers(store)
    await mls.create(ML)
    cursor = ManagedCursorInfo(cursorsLedgerId=17, markDeleteLedgerId=1, markDeleteEntryId=2)
    await mls.create_cursor(ML, "my+sub", cursor)
    assert await mls.cursors(ML) == ["my+sub"]
    record = await mls.read_cursor(ML, "my+sub")
    assert (record.value.cursorsLedgerId, record.version) == (17, 0)
    closed = ManagedCursorInfo(cursorsLedgerId=-1, markDeleteLedgerId=1, markDeleteEntryId=3)
    assert await mls.write_cursor(ML, "my+sub", closed, version=0) == 1
    with pytest.raises(VersionConflict):
        await mls.write_cursor(ML, "my+sub", closed, version=0)


def locator(*ledger_ids: int) -> SchemaLocator:
    result = SchemaLocator()
    for version, ledger_id in enumerate(ledger_ids):
        entry = result.index.add(version=version, hash=b"h")
        entry.position.ledgerId, entry.position.entryId = ledger_id, 0
    result.info.CopyFrom(result.index[-1])
    return result


async def test_schemas(store: ZkMetadataStore) -> None:
    """Schema locators read, CAS-write and list by schema id."""
    schemas = Schemas(store)
    assert await schemas.create("t/ns/x", locator(30)) == 0
    assert await schemas.write("t/ns/x", locator(30, 31), version=0) == 1
    with pytest.raises(VersionConflict):
        await schemas.write("t/ns/x", locator(32), version=0)
    assert [e.position.ledgerId for e in (await schemas.read("t/ns/x")).value.index] == [30, 31]
    assert [s async for s in schemas.schema_ids()] == ["t/ns/x"]
