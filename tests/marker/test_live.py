"""The marker against the real ZooKeeper and the devstack broker, PDLIs read back with a
real `pulsar-client` consumer."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import grpc
import pytest
from grpc import aio

from devstack.pulsar import PulsarBrokerProcess
from devstack.zookeeper import ZooKeeperServer
from services.metadata import decode_managed_ledger_info
from tests.marker.builders import (
    ML_NAME,
    ML_PATH,
    TOPIC,
    UID_LSB,
    UID_MSB,
    ledger,
    ml_bytes,
    ml_ledger_ids,
)
from tests.marker.live import create_system_topic, live_marker, read_topic
from tests.store_kinds import StoreKind
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd


def _request(*ledger_ids: int, **fields: object) -> _mk.MarkLedgersRequest:
    return _mk.MarkLedgersRequest(
        component=_pd.MANAGED_LEDGER,
        managed_ledger_name=ML_NAME,
        ledger_ids=ledger_ids,
        **fields,  # type: ignore[arg-type]
    )


def _offloaded(ledger_id: int) -> bool:
    return ledger_id % 10 == 0


@pytest.mark.parametrize("count", [1, 1000])
async def test_mark_k_ledgers_end_to_end(
    store_kind: StoreKind, broker: PulsarBrokerProcess, count: int
) -> None:
    """K ledgers (every tenth offloaded) give exactly K + offloaded PDLIs with every field
    right, and exactly one znode write that removes them."""
    create_system_topic(broker)
    ids = list(range(100, 100 + count))
    kept = [ledger(5), ledger(6)]
    listed = [ledger(i, offload="complete" if _offloaded(i) else None) for i in ids]
    async with live_marker(store_kind, broker) as (_, store, stub):
        created = await store.create(ML_PATH, ml_bytes(*listed, *kept), make_parents=True)
        response = await stub.MarkLedgers(_request(*ids, request_id="bulk"))
        node = await store.get(ML_PATH)
    offloaded = [i for i in ids if _offloaded(i)]
    expected = len(ids) + len(offloaded)
    received = await read_topic(broker, expected)
    assert (expected, expected, node.version, True) == (
        len(received),
        response.pdlis_sent,
        response.new_version,
        response.written,
    )
    # ZooKeeper counts a znode's writes; Oxia's version ids come from a counter of the shard.
    assert node.version == 1 if store_kind.oxia is None else node.version > created.version
    assert ml_ledger_ids(node.data) == [5, 6]
    assert "orders" not in decode_managed_ledger_info(node.data, path=ML_PATH).properties[0].value
    tiers = sorted((r.pdli.ledger_id, r.pdli.ledger_type) for r in received)
    assert (
        sorted([(i, _pd.LEDGER) for i in ids] + [(i, _pd.OFFLOAD_LEDGER) for i in offloaded])
        == tiers
    )
    for r in received:
        # The token is the version read plus one on either store: Oxia's ids only grow, so
        # "reached" keeps its meaning there (docs/design.md, 4.8).
        _check_fields(r, fence_token=created.version + 1)


def _check_fields(r: object, *, fence_token: int = 1) -> None:
    from tests.marker.live import Received

    assert isinstance(r, Received)
    p = r.pdli
    assert (
        p.component,
        p.topic_name,
        p.managed_ledger_name,
        p.fence_token,
        p.source,
        p.marker_id,
        p.cluster,
        p.request_id,
        p.not_before_ms - p.marked_at_ms,
    ) == (
        _pd.MANAGED_LEDGER,
        TOPIC,
        ML_NAME,
        fence_token,
        _pd.BROKER,
        "marker-test",
        "test",
        "bulk",
        5000,
    )
    assert (str(p.ledger_id), str(p.ledger_id), "marker-test") == (
        r.partition_key,
        r.properties["ledgerId"],
        r.producer_name,
    )
    if p.ledger_type == _pd.OFFLOAD_LEDGER:
        ctx = p.offload_context
        assert (
            ctx.uuid_msb,
            ctx.uuid_lsb,
            ctx.driver_name,
            ctx.driver_metadata["bucket"],
        ) == (UID_MSB, UID_LSB, "aws-s3", "offload-bucket")


async def test_both_tiers_of_a_ledger_share_a_partition(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """Routing by ledger id puts the LEDGER and OFFLOAD_LEDGER PDLIs on one partition."""
    create_system_topic(broker)
    ids = list(range(1, 41))
    async with live_marker(zk, broker) as (_, store, stub):
        await store.create(
            ML_PATH, ml_bytes(*(ledger(i, offload="started") for i in ids)), make_parents=True
        )
        await stub.MarkLedgers(_request(*ids))
    received = await read_topic(broker, 80)
    partitions: dict[int, set[int]] = {}
    for r in received:
        partitions.setdefault(r.pdli.ledger_id, set()).add(r.partition)
    assert (
        [len(p) for p in partitions.values()],
        len({r.partition for r in received}) > 1,
    ) == ([1] * 40, True)


async def test_partial_send_failure_unlinks_only_acknowledged_ledgers(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """A batch the broker refuses (ChecksumError fails it without retry) leaves its ledgers
    listed with SEND_FAILED; the acknowledged ones leave the list and are on the topic."""
    create_system_topic(broker)
    ids = list(range(1, 41))
    async with live_marker(zk, broker) as (_, store, stub):
        await store.create(ML_PATH, ml_bytes(*(ledger(i) for i in ids)), make_parents=True)
        broker.control.fail_sends(1, error="ChecksumError")
        response = await stub.MarkLedgers(_request(*ids))
        node = await store.get(ML_PATH)
    marked = sorted(m.ledger_id for m in response.marked)
    failed = sorted(n.ledger_id for n in response.not_marked)
    received = await read_topic(broker, len(marked))
    assert (ids, True, True) == (sorted(marked + failed), bool(marked), bool(failed))
    assert {_mk.SEND_FAILED} == {n.reason for n in response.not_marked}
    assert (failed, marked) == (
        ml_ledger_ids(node.data),
        sorted(r.pdli.ledger_id for r in received),
    )


async def test_cas_conflict_after_send_keeps_the_ledgers_listed(
    store_kind: StoreKind, broker: PulsarBrokerProcess
) -> None:
    """Someone else writes the znode between the sends and the write: ABORTED, the PDLIs are on
    the topic, the ledgers stay listed."""
    create_system_topic(broker)
    async with live_marker(store_kind, broker, pause_after_send=timedelta(seconds=0.5)) as (
        _,
        store,
        stub,
    ):
        created = await store.create(ML_PATH, ml_bytes(ledger(1), ledger(2)), make_parents=True)
        call = asyncio.ensure_future(stub.MarkLedgers(_request(1, 2)))
        await asyncio.sleep(0.25)
        await store.set(ML_PATH, ml_bytes(ledger(1), ledger(2), ledger(3)), version=created.version)
        with pytest.raises(aio.AioRpcError) as info:
            await call
        node = await store.get(ML_PATH)
    received = await read_topic(broker, 2)
    assert (
        info.value.code(),
        ml_ledger_ids(node.data),
        sorted(r.pdli.ledger_id for r in received),
    ) == (grpc.StatusCode.ABORTED, [1, 2, 3], [1, 2])
    assert "are on the system topic; nothing was unlinked" in (info.value.details() or "")


async def test_zookeeper_down_at_write_reports_unavailable(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """ZooKeeper stops between the sends and the write: UNAVAILABLE; after it is back, the
    ledgers are still listed and the PDLIs are on the topic."""
    create_system_topic(broker)
    async with live_marker(zk, broker, pause_after_send=timedelta(seconds=0.5)) as (
        _,
        store,
        stub,
    ):
        await store.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        call = asyncio.ensure_future(stub.MarkLedgers(_request(1)))
        await asyncio.sleep(0.2)
        zk.stop()
        with pytest.raises(aio.AioRpcError) as info:
            await call
    zk.start()
    async with live_marker(zk, broker, producer_name="marker-test-2") as (_, store, _stub):
        node = await store.get(ML_PATH)
    received = await read_topic(broker, 1)
    assert (
        info.value.code(),
        ml_ledger_ids(node.data),
        [r.pdli.ledger_id for r in received],
    ) == (grpc.StatusCode.UNAVAILABLE, [1], [1])


async def test_dropped_connections_mid_batch_duplicate_nothing(
    zk: ZooKeeperServer, broker: PulsarBrokerProcess
) -> None:
    """The broker drops every connection while a large batch is in flight: the client resends
    with the same producer name and sequence ids, the broker deduplicates, and the topic holds
    each PDLI exactly once."""
    create_system_topic(broker)
    ids = list(range(1, 2001))
    async with live_marker(zk, broker) as (_, store, stub):
        await store.create(ML_PATH, ml_bytes(*(ledger(i) for i in ids)), make_parents=True)
        broker.control.delay_sends(0.3, duration=1.0)
        call = asyncio.ensure_future(stub.MarkLedgers(_request(*ids)))
        await asyncio.sleep(0.1)
        await asyncio.to_thread(broker.control.drop_connections)
        response = await call
    received = await read_topic(broker, len(ids))
    assert (len(ids), ids) == (len(response.marked), sorted(r.pdli.ledger_id for r in received))


@pytest.mark.parametrize(
    ("request_fields", "code", "field"),
    [
        ({"managed_ledger_name": ""}, grpc.StatusCode.INVALID_ARGUMENT, "managed_ledger_name"),
        ({"ledger_ids": [1, -3]}, grpc.StatusCode.INVALID_ARGUMENT, "ledger_ids[1]"),
        ({"ledger_ids": [1, 1]}, grpc.StatusCode.INVALID_ARGUMENT, "ledger_ids"),
        ({"ledger_ids": list(range(20))}, grpc.StatusCode.INVALID_ARGUMENT, "ledger_ids"),
        (
            {"component": _pd.MANAGED_CURSOR},
            grpc.StatusCode.INVALID_ARGUMENT,
            "cursor_name",
        ),
        (
            {"managed_ledger_name": "public/default/persistent/unknown"},
            grpc.StatusCode.NOT_FOUND,
            "/managed-ledgers/public/default/persistent/unknown",
        ),
    ],
)
async def test_bad_requests_send_and_write_nothing(
    zk: ZooKeeperServer,
    broker: PulsarBrokerProcess,
    request_fields: dict[str, object],
    code: grpc.StatusCode,
    field: str,
) -> None:
    """Malformed requests and unknown owners fail with the status and a message naming the
    field (or path); nothing reaches the topic and the znode keeps its version."""
    create_system_topic(broker)
    fields: dict[str, object] = {
        "component": _pd.MANAGED_LEDGER,
        "managed_ledger_name": ML_NAME,
        "ledger_ids": [1],
    }
    fields.update(request_fields)
    async with live_marker(zk, broker, max_batch=10) as (_, store, stub):
        await store.create(ML_PATH, ml_bytes(ledger(1)), make_parents=True)
        with pytest.raises(aio.AioRpcError) as info:
            await stub.MarkLedgers(_mk.MarkLedgersRequest(**fields))  # type: ignore[arg-type]
        node = await store.get(ML_PATH)
    assert (code, 0, []) == (info.value.code(), node.version, await read_topic(broker, 0))
    assert (info.value.details() or "").startswith(field)


async def test_cursor_owner_end_to_end(zk: ZooKeeperServer, broker: PulsarBrokerProcess) -> None:
    """A cursor ledger: one MANAGED_CURSOR PDLI on the topic, the cursor znode written once
    with the new ledger id."""
    from services.metadata import decode_cursor_info
    from tests.marker.builders import CURSOR, CURSOR_PATH, cursor_bytes

    create_system_topic(broker)
    async with live_marker(zk, broker) as (_, store, stub):
        await store.create(CURSOR_PATH, cursor_bytes(70), make_parents=True)
        response = await stub.MarkLedgers(
            _mk.MarkLedgersRequest(
                component=_pd.MANAGED_CURSOR,
                topic_name=TOPIC,
                cursor_name=CURSOR,
                ledger_ids=[70],
                new_cursor_ledger_id=71,
            )
        )
        node = await store.get(CURSOR_PATH)
    [received] = await read_topic(broker, 1)
    info = decode_cursor_info(node.data, path=CURSOR_PATH)
    assert (node.version, info.cursorsLedgerId, response.new_version) == (1, 71, 1)
    assert (
        received.pdli.ledger_id,
        received.pdli.component,
        received.pdli.managed_ledger_name,
        received.pdli.cursor_name,
        received.pdli.fence_token,
    ) == (70, _pd.MANAGED_CURSOR, ML_NAME, CURSOR, 1)


async def test_schema_owner_end_to_end(zk: ZooKeeperServer, broker: PulsarBrokerProcess) -> None:
    """Schema ledgers: SCHEMA_STORAGE PDLIs on the topic, the locator written once without
    them."""
    from services.metadata import decode_schema_locator
    from tests.marker.builders import SCHEMA_ID, SCHEMA_PATH, schema_bytes

    create_system_topic(broker)
    async with live_marker(zk, broker) as (_, store, stub):
        await store.create(SCHEMA_PATH, schema_bytes(80, 81, 82), make_parents=True)
        await stub.MarkLedgers(
            _mk.MarkLedgersRequest(
                component=_pd.SCHEMA_STORAGE, schema_id=SCHEMA_ID, ledger_ids=[80, 81]
            )
        )
        node = await store.get(SCHEMA_PATH)
    received = await read_topic(broker, 2)
    locator = decode_schema_locator(node.data, path=SCHEMA_PATH)
    assert (node.version, [e.position.ledgerId for e in locator.index]) == (1, [82])
    assert sorted((r.pdli.ledger_id, r.pdli.schema_id) for r in received) == [
        (80, SCHEMA_ID),
        (81, SCHEMA_ID),
    ]
    assert {_pd.SCHEMA_STORAGE} == {r.pdli.component for r in received}
