"""Bad input on the system topic, with the real parts: a marker that dies between send and
write, duplicate PDLIs, forged PDLIs and garbage bytes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.simulator import ClusterModel
from devstack.zookeeper import ZooKeeperServer
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.systopic import IntentPublisher, ProducerSettings, encode_intent
from services.systopic._pulsar import open_intent_publisher
from services.systopic.ports import OutgoingMessage, SendResult
from tests.deleter.stack import (
    deleter_config,
    drained,
    mark_trims,
    pulsar_config,
    run_deleter_until_drained,
    running_deleter,
    running_e2e_deleter,
    running_marker,
    unsigned_pdli,
)
from tests.deleter_e2e.checks import (
    assert_all_gone,
    assert_safe,
    ledgers_in_zookeeper,
    objects_in_s3,
)
from tests.helpers import assert_eventually
from tombstone.v1 import pending_delete_pb2 as _pd

Cluster = tuple[ClusterModel, set[str], str]


def trimmable(model: ClusterModel) -> list[tuple[str, tuple[int, ...]]]:
    return [
        (ml.name, ml.ledger_ids[:-1])
        for ml in model.managed_ledgers.values()
        if len(ml.ledger_ids) > 1 and not ml.shadow_source
    ]


async def publish(broker: PulsarBrokerProcess, messages: Sequence[OutgoingMessage]) -> None:
    settings = ProducerSettings(producer_name="forger")
    async with open_intent_publisher(pulsar_config(broker), settings) as publisher:
        results = await publisher.publish(messages)
    assert all(r.ok for r in results)


async def test_marker_dying_between_send_and_write_never_deletes_listed_ledgers(
    cluster: Cluster, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """PDLIs whose marking never completed keep retrying (fence token not reached), then end
    in the DLQ; the still-listed ledgers and their objects are untouched."""
    model, before, verifier = cluster
    name, ids = trimmable(model)[0]
    owner = resolve_owner(
        _pd.MANAGED_LEDGER, topic_name="", ml_name=name, cursor_name="", schema_id=""
    )
    pause = timedelta(seconds=60)
    async with running_marker(zk, broker, verifier, pause_after_send=pause) as marker:
        marking = asyncio.create_task(marker.mark(MarkRequest(owner=owner, ledger_ids=ids)))
        config = deleter_config(zk, s3, broker, verifier)
        async with running_deleter(config) as running:
            await asyncio.sleep(0.5)
            marking.cancel()  # the marker dies before its write
            status = await drained(running.deleter)
            letters, _ = await running.deleter.admin.list_dead_letters(limit=1000)
    listed, remaining = await assert_safe(zk, s3, model, before)
    assert set(ids) <= listed
    assert {p.ledger_id for p in (letter.pdli for letter in letters) if p} == set(ids)
    assert before == remaining
    assert {"retries_exhausted"} == set(status.dead_letters_by_reason)


@dataclass
class Doubling:
    """Publishes every message twice (a duplicate PDLI for each)."""

    inner: IntentPublisher

    @property
    def producer_name(self) -> str:
        return self.inner.producer_name

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        results = await self.inner.publish([*messages, *messages])
        return results[: len(messages)]

    async def close(self) -> None:
        await self.inner.close()


async def test_duplicate_pdlis_are_harmless(
    cluster: Cluster, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Each PDLI twice on the topic: everything unlinked is deleted once, no dead letter."""
    model, before, verifier = cluster
    async with running_marker(zk, broker, verifier, wrap_publisher=Doubling) as marker:
        marked = await mark_trims(marker, model)
    status = await run_deleter_until_drained(zk, s3, broker, verifier)
    listed, _ = await assert_safe(zk, s3, model, before)
    await assert_all_gone(zk, s3, model, marked, listed)
    assert status.dead_letter_backlog == 0


def forged(model: ClusterModel) -> list[OutgoingMessage]:
    """PDLIs nobody marked: listed ledgers (own and other owner), a missing ledger, an
    offloaded copy still listed, and one without a ledger type."""
    ml = next(m for m in model.managed_ledgers.values() if len(m.ledger_ids) > 1)
    other = next(m for m in model.managed_ledgers.values() if m.name != ml.name)
    offloaded = next(
        (m, info)
        for m in model.managed_ledgers.values()
        for info in m.ledgers
        if info.offload is not None
    )

    m, info = offloaded
    assert info.offload is not None
    from services.metadata import uuid_to_bits

    msb, lsb = uuid_to_bits(info.offload.uuid)
    context = _pd.OffloadContext(
        uuid_msb=msb, uuid_lsb=lsb, driver_name=info.offload.driver_name, complete=True
    )
    context.driver_metadata.update(dict(info.offload.driver_properties))
    pdlis = [
        unsigned_pdli(ml.ledger_ids[0], ml.name),
        unsigned_pdli(ml.ledger_ids[0], other.name),
        unsigned_pdli(999_999, ml.name),
        unsigned_pdli(
            info.ledger_id, m.name, ledger_type=_pd.OFFLOAD_LEDGER, offload_context=context
        ),
        unsigned_pdli(ml.ledger_ids[0], ml.name, ledger_type=_pd.LEDGER_TYPE_UNSPECIFIED),
        unsigned_pdli(999_998, ml.name, cluster="another-cluster"),
    ]
    return [encode_intent(p) for p in pdlis]


async def test_forged_pdlis_delete_nothing(
    cluster: Cluster, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """PDLIs published straight to the topic for listed or missing ledgers delete nothing:
    every ledger and object is still there. Those still referenced (IN_USE) or absent
    (NOT_FOUND) are settled; the one naming another owner (MISMATCH) and the one without a
    ledger type (INVALID) and the one naming another cluster (FOREIGN) settle nothing and are in
    the DLQ with that reason."""
    model, before, verifier = cluster
    await publish(broker, forged(model))
    status = await run_deleter_until_drained(zk, s3, broker, verifier)
    in_bk = {led.ledger_id for led in model.bookkeeper_ledgers()}
    assert in_bk == await ledgers_in_zookeeper(zk, in_bk)
    assert before == objects_in_s3(s3)
    assert status.dead_letters_by_reason == {"mismatch": 1, "invalid": 1, "foreign": 1}


async def test_garbage_is_dead_lettered_and_the_deleter_keeps_running(
    cluster: Cluster, zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Garbage bytes (and an empty message, a PDLI without a ledger id) go to the DLQ as
    undecodable; PDLIs after them are still handled."""
    model, before, verifier = cluster
    garbage = [OutgoingMessage(b"\x00\xff not a pdli", "x", {}), OutgoingMessage(b"", "y", {})]
    async with running_e2e_deleter(zk, s3, broker, verifier) as running:
        await publish(broker, garbage)
        async with running_marker(zk, broker, verifier) as marker:
            marked = await mark_trims(marker, model)

        async def two_dead_letters() -> None:
            status = await running.deleter.admin.status()
            assert status.dead_letters_by_reason == {"undecodable": 2}

        await drained(running.deleter)
        await assert_eventually(two_dead_letters, timeout=20)
        letters, _ = await running.deleter.admin.list_dead_letters(limit=10)
    listed, _ = await assert_safe(zk, s3, model, before)
    await assert_all_gone(zk, s3, model, marked, listed)
    assert {letter.payload for letter in letters} == {b"\x00\xff not a pdli", b""}
