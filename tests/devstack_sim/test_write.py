"""The writer against real ZooKeeper and S3: what the stores read back is the model."""

from __future__ import annotations

from dataclasses import replace

import aiozk
import pytest

from devstack.simulator.model import ClusterModel, OrphanKind
from devstack.simulator.readback import expected, read_cluster
from devstack.simulator.s3 import S3ObjectStore
from devstack.simulator.spec import (
    FIRST_LONG_LEDGER_ID,
    ClusterSpec,
    Compression,
    IdLayout,
    OffloadDriver,
    OrphanPlan,
)
from devstack.simulator.writer import write_cluster
from devstack.zookeeper import ZooKeeperServer
from services.core.errors import FailedPrecondition
from services.metadata import (
    LedgerPaths,
    ZkMetadataStore,
    decode_managed_ledger_info,
    managed_ledger_path,
    parse_index_header,
)
from services.metadata.offload import DATA_BLOCK_MAGIC
from tests.devstack_sim.conftest import SMALL
from tests.helpers import assert_eventually
from tombstone.formats import bookkeeper_pb2 as _bk


async def _write(store: ZkMetadataStore, objects: S3ObjectStore, spec: ClusterSpec) -> ClusterModel:
    return await write_cluster(spec, store=store, s3_client=objects, concurrency=32)


async def test_stores_read_back_exactly_the_model(store, objects) -> None:
    """Ledgers, ML lists with offload contexts, cursors, locators, partitions and objects
    read back through the metadata layer equal the model (mixed ids, LZ4, some v2)."""
    spec = replace(SMALL, id_layout=IdLayout.MIXED, compression=Compression.LZ4, v2_share=0.3)
    model = await _write(store, objects, spec)
    back = await read_cluster(store, s3_client=objects, buckets=(spec.bucket,))
    assert expected(model) == back


async def test_long_ids_live_on_the_long_path_and_read_back(store, objects) -> None:
    """With LONG ids every ledger znode is under the 3-digit tree."""
    model = await _write(store, objects, replace(SMALL, id_layout=IdLayout.LONG))
    back = await read_cluster(store)
    assert expected(model).ledgers == back.ledgers
    assert [n for n in await store.get_children("/ledgers") if n.isdigit()] == ["000"]


@pytest.mark.parametrize("compression", [Compression.ZLIB, Compression.ZSTD, Compression.SNAPPY])
async def test_compressed_ml_znodes_start_with_the_magic_and_decode(store, compression) -> None:
    """Compressed ML znodes carry 0x4778 and decode to the model's list."""
    spec = replace(
        SMALL,
        compression=compression,
        offload_driver=OffloadDriver.FILESYSTEM,
        orphans=OrphanPlan(),
    )
    model = await write_cluster(spec, store=store, s3_client=None)
    ml = next(m for m in model.managed_ledgers.values() if m.ledgers)
    data = (await store.get(managed_ledger_path(ml.name))).data
    assert data[:2] == b"\x47\x78"
    info = decode_managed_ledger_info(data, path=ml.name)
    assert list(ml.ledger_ids) == [item.ledgerId for item in info.ledgerInfo]


async def test_filesystem_offloads_record_the_base_path_and_write_no_objects(store) -> None:
    """driverMetadata is {storageBasePath}; nothing goes to S3."""
    spec = replace(
        SMALL, offload_driver=OffloadDriver.FILESYSTEM, orphans=OrphanPlan(), offloaded_share=1.0
    )
    model = await write_cluster(spec, store=store, s3_client=None)
    offloads = [i.offload for m in model.managed_ledgers.values() for i in m.ledgers if i.offload]
    assert offloads
    assert {("filesystem", (("storageBasePath", spec.filesystem_base),))} == {
        (o.driver_name, o.driver_properties) for o in offloads
    }
    assert model.objects == {}
    assert expected(model).managed_ledgers == (await read_cluster(store)).managed_ledgers


async def test_same_seed_writes_identical_bytes_and_another_seed_does_not(zk, s3, objects) -> None:
    """Two writes of one spec (under two chroots, S3 emptied between) are byte-identical."""
    dumps = []
    for root, seed in (("/a", SMALL.seed), ("/b", SMALL.seed), ("/c", SMALL.seed + 1)):
        s3.reset()
        dumps.append(await _write_and_dump(zk, objects, root, replace(SMALL, seed=seed)))
    assert dumps[0] == dumps[1]
    assert dumps[0] != dumps[2]


async def _write_and_dump(
    zk: ZooKeeperServer, objects: S3ObjectStore, root: str, spec: ClusterSpec
) -> tuple[dict[str, bytes], dict[str, bytes]]:
    async with ZkMetadataStore.connect(zk.address) as top:
        await top.create(root)
    bucket = spec.bucket
    async with ZkMetadataStore.connect(zk.address, chroot=root) as store:
        await write_cluster(spec, store=store, s3_client=objects)
        znodes = await _dump(store, "/")
    bodies = {
        key: await objects.get_object(bucket=bucket, key=key)
        for key in await objects.list_keys(bucket=bucket)
    }
    return znodes, bodies


async def _dump(store: ZkMetadataStore, path: str) -> dict[str, bytes]:
    out = {path: (await store.get(path)).data}
    for child in await store.get_children(path):
        if path == "/" and child == "zookeeper":
            continue
        out.update(await _dump(store, f"{path.rstrip('/')}/{child}"))
    return out


async def test_ml_intermediate_nodes_hold_empty_data(store, objects) -> None:
    """`/managed-ledgers/<t>`, `<t>/<ns>` and `<t>/<ns>/persistent` hold 0 bytes."""
    model = await _write(store, objects, SMALL)
    ml = next(iter(model.managed_ledgers.values()))
    parts = managed_ledger_path(ml.name).split("/")
    for depth in (3, 4, 5):
        assert (await store.get("/".join(parts[:depth]))).data == b""


async def test_ledger_parents_are_containers_reaped_once_empty(store, objects) -> None:
    """Pulsar's store creates missing parents as CONTAINERs: once the last ledger of a
    bucket is deleted, ZooKeeper removes the bucket itself."""
    model = await _write(store, objects, SMALL)
    paths = LedgerPaths()
    ledger_ids = [led.ledger_id for led in model.bookkeeper_ledgers()]
    parent = paths.ledger_path(ledger_ids[0]).rsplit("/", 1)[0]
    for ledger_id in ledger_ids:
        await store.delete(paths.ledger_path(ledger_id), version=0)

    async def reaped() -> None:
        assert await store.exists(parent) is None

    await assert_eventually(reaped, timeout=3)


async def test_bookkeeper_special_znodes_are_written(store, objects) -> None:
    """LAYOUT text, INSTANCEID, available bookies and the id generator are there."""
    model = await _write(store, objects, SMALL)
    layout = (await store.get("/ledgers/LAYOUT")).data
    assert layout == b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"
    assert model.instance_id.encode() == (await store.get("/ledgers/INSTANCEID")).data
    available = set(await store.get_children("/ledgers/available"))
    assert {"readonly", *model.bookies} == available
    assert await store.get_children("/ledgers/idgen") == []


async def test_id_generators_continue_after_the_simulated_ledgers(zk, store, objects) -> None:
    """A real `idgen/ID-` (and `idgen-long/HOB-1/ID-`) create yields the next free id."""
    model = await _write(store, objects, replace(SMALL, id_layout=IdLayout.MIXED))
    short_next = max(i for i in model.ledgers if i < FIRST_LONG_LEDGER_ID) + 1
    long_next = max(model.ledgers) + 1 - FIRST_LONG_LEDGER_ID
    client = aiozk.ZKClient(zk.address)
    await client.start()
    try:
        short = await client.create("/ledgers/idgen/ID-", ephemeral=True, sequential=True)
        long = await client.create(
            "/ledgers/idgen-long/HOB-0000000001/ID-", ephemeral=True, sequential=True
        )
    finally:
        await client.close()
    assert (f"ID-{short_next:010d}", f"ID-{long_next:010d}") == (
        short.rsplit("/", 1)[1],
        long.rsplit("/", 1)[1],
    )


async def test_bookkeeper_deleted_ledgers_have_no_znode_but_leftovers_do(store, objects) -> None:
    """`bookkeeperDeleted` ledgers are absent from /ledgers; the planted leftover is present."""
    model = await _write(store, objects, SMALL)
    back = await read_cluster(store)
    (leftover,) = model.planted_of(OrphanKind.BK_AFTER_OFFLOAD)
    gone = {led.ledger_id for led in model.ledgers.values() if not led.in_bookkeeper}
    assert gone
    assert set() == gone & set(back.ledgers)
    assert leftover.ledger_id in back.ledgers


async def test_young_ledgers_are_written_after_the_age_boundary(store, objects) -> None:
    """Old ledgers' znode ctime < young_since_ms <= young ledgers' ctime."""
    model = await _write(store, objects, SMALL)
    assert model.young_since_ms is not None
    paths = LedgerPaths()
    for ledger in model.bookkeeper_ledgers():
        ctime = (await store.get(paths.ledger_path(ledger.ledger_id))).ctime_ms
        assert ledger.young == (ctime >= model.young_since_ms)
    assert model.young_since_ms + 1000 == model.clock_for_window(1000)


async def test_offload_objects_have_the_real_headers(store, objects) -> None:
    """Data objects start with 0xFBDBABCB; the index header (0xDE47DE47) embeds the ledger's
    metadata without its cToken."""
    model = await _write(store, objects, SMALL)
    obj = next(o for o in model.objects.values() if o.role == "index")
    index = await objects.get_object(bucket=obj.bucket, key=obj.key)
    data = await objects.get_object(bucket=obj.bucket, key=obj.key[: -len("-index")])
    assert DATA_BLOCK_MAGIC.to_bytes(4, "big") == data[:4]
    header = parse_index_header(index)
    assert len(data) == header.data_object_length
    embedded = _bk.LedgerMetadataFormat.FromString(header.segment_metadata)
    custom = {entry.key: entry.value for entry in embedded.customMetadata}
    source = obj.source.metadata
    assert (False, dict(source.custom_metadata), source.length) == (
        embedded.HasField("cToken"),
        custom,
        embedded.length,
    )


async def test_writer_refuses_a_tree_that_already_has_ledgers(store, objects) -> None:
    """Writing into an existing ledgers root would collide ids: FailedPrecondition."""
    await store.create("/ledgers")
    with pytest.raises(FailedPrecondition):
        await _write(store, objects, SMALL)


async def test_objects_without_an_s3_client_are_refused(store) -> None:
    """A model with objects and no S3 client fails before anything is written."""
    with pytest.raises(FailedPrecondition):
        await write_cluster(SMALL, store=store, s3_client=None)
    assert await store.exists("/ledgers") is None
