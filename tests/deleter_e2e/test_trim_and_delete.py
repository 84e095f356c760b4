"""End to end with the real parts: a simulated cluster trimmed through the marker, verified by
the verifier and deleted by the deleter."""

from __future__ import annotations

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from tests.deleter.stack import (
    create_topics,
    deleter_config,
    drained,
    mark_cursor_and_schema_trims,
    mark_trims,
    running_deleter,
    running_marker,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import (
    cursor_and_schema_ledgers_now,
    ledgers_in_zookeeper,
    listed_now,
    object_sizes_in_s3,
    objects_in_s3,
)
from tests.store_kinds import StoreKind
from tombstone.v1 import pending_delete_pb2 as _pd


async def test_trim_deletes_every_unlinked_ledger_and_nothing_listed(
    store_kind: StoreKind, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Data, cursor and schema ledgers trimmed through the marker (offloaded ones with and
    without `bookkeeperDeleted`): every ledger the marker unlinked is gone from ZooKeeper and
    both its objects from S3; every ledger still referenced and its objects are untouched.
    Cursor ledgers are marked OPEN, as `ManagedCursorImpl.asyncDeleteCursorLedger` leaves
    them (it deletes by id without closing). On both stores: the marker's compare-and-set, the
    verifier's in-use and NOT_FOUND decisions on ledger metadata, the deleter's conditional
    delete."""
    create_topics(broker)
    model = await write_cluster(store_kind, s3)
    sizes = object_sizes_in_s3(s3)
    objects_before = set(sizes)
    async with running_verifier(store_kind, s3) as verifier:
        async with running_marker(store_kind, broker, verifier) as marker:
            marked = await mark_trims(marker, model)
            side = await mark_cursor_and_schema_trims(marker, model)
        async with running_deleter(deleter_config(store_kind, s3, broker, verifier)) as running:
            status = await drained(running.deleter)
    listed, listed_keys = await listed_now(store_kind, model)
    kept = listed | await cursor_and_schema_ledgers_now(store_kind, model)
    unlinked_bk = (marked[_pd.LEDGER] | side) - kept
    assert side - kept
    unlinked_offload = marked[_pd.OFFLOAD_LEDGER] - listed
    assert unlinked_bk
    assert unlinked_offload
    offloads = {
        info.ledger_id: info.offload
        for ml in model.managed_ledgers.values()
        for info in ml.ledgers
        if info.offload is not None
    }
    kinds = {offloads[i].bookkeeper_deleted for i in unlinked_offload}
    assert {True, False} == kinds  # offloaded with and without bookkeeperDeleted
    assert set() == await ledgers_in_zookeeper(store_kind, unlinked_bk)
    in_bk = {led.ledger_id for led in model.bookkeeper_ledgers()}
    assert kept & in_bk == await ledgers_in_zookeeper(store_kind, kept & in_bk)
    remaining = objects_in_s3(s3)
    gone_keys = {o.key for o in model.objects.values() if o.ledger_id in unlinked_offload}
    assert set() == remaining & gone_keys
    assert objects_before - gone_keys == remaining
    assert listed_keys <= remaining
    assert status.dead_letter_backlog == 0
    # Bytes deleted come from the verifier's evidence: the size of the object it HEADed for
    # each deleted ledger exactly (the data object; the index only where no data object was
    # left); for BookKeeper the lengths of the closed ledgers (open cursor ledgers add nothing).
    deleted_bytes = running.metrics.registry.get_sample_value
    bytes_s3 = deleted_bytes("tombstone_deleter_bytes_deleted_total", {"tier": "s3"})
    assert bytes_s3 == headed_sizes(sizes, gone_keys) > 0
    assert (deleted_bytes("tombstone_deleter_bytes_deleted_total", {"tier": "bookkeeper"}) or 0) > 0


def headed_sizes(sizes: dict[str, int], keys: set[str]) -> int:
    """Per upload among `keys`: its data object's size, or its index's when it has no data
    object (what the verifier HEADs, so what its evidence counts)."""
    stems = {key.removesuffix("-index") for key in keys}
    return sum(sizes[stem] if stem in sizes else sizes[f"{stem}-index"] for stem in stems)
