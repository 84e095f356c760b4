"""Signed intents end to end (docs/design.md §4.7): the real ZooKeeper, moto S3, the
devstack broker reached by the real pulsar-client, the verifier requiring signatures, and
the deleter. A forged PDLI deletes nothing and ends in the DLQ as `forged`; the marker's
own signed PDLI for the same ledger deletes it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulsar
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.signing import IntentSigner
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.systopic import decode_intent, encode_intent
from services.systopic.ports import OutgoingMessage, SendResult
from tests.deleter.stack import (
    SMALL_SPEC,
    SYSTEM,
    create_topics,
    drained,
    running_e2e_deleter,
    running_marker,
    running_verifier,
    write_cluster,
)
from tests.deleter_e2e.checks import ledgers_in_zookeeper, objects_in_s3
from tests.helpers import signing_pair
from tombstone.v1 import pending_delete_pb2 as _pd

SIGNER, TRUSTED = signing_pair("marker-1")


@dataclass
class Holding:
    """A publisher port that keeps the marker's messages instead of sending them, and
    reports them stored: the test then puts them (or forgeries of them) on the topic."""

    held: list[OutgoingMessage] = field(default_factory=list)

    @property
    def producer_name(self) -> str:
        return "holding"

    async def publish(self, messages: Sequence[OutgoingMessage]) -> list[SendResult]:
        self.held += messages
        return [SendResult(message_id="held")] * len(messages)

    async def close(self) -> None:
        pass


def produce(broker: PulsarBrokerProcess, messages: Sequence[OutgoingMessage]) -> None:
    """Straight onto the system topic with the real pulsar-client, as an attacker would."""
    client = pulsar.Client(broker.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    try:
        producer = client.create_producer(SYSTEM)
        for message in messages:
            producer.send(
                message.payload,
                properties=dict(message.properties),
                partition_key=message.partition_key,
            )
        producer.flush()
    finally:
        client.close()


def unsigned(message: OutgoingMessage) -> OutgoingMessage:
    pdli = decode_intent(message.payload)
    pdli.ClearField("signing_key_id")
    pdli.ClearField("signature")
    return encode_intent(pdli)


def signed_by(message: OutgoingMessage, signer: IntentSigner) -> OutgoingMessage:
    return encode_intent(decode_intent(unsigned(message).payload), signer)


def identity(pdli: _pd.PendingDeleteLedgerInfo | None) -> tuple[int, int, str, bytes]:
    assert pdli is not None
    return pdli.ledger_id, pdli.ledger_type, pdli.signing_key_id, pdli.signature


async def test_forged_intents_delete_nothing_and_the_signed_one_deletes(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """The marker unlinks a topic's old ledgers; the PDLIs reach the topic unsigned, then
    signed by an untrusted key under the marker's key id, then by an unknown key id: every
    one is dead-lettered as `forged` and the ledgers stay. Then the marker's own signed
    PDLIs arrive and the same ledgers are deleted."""
    create_topics(broker)
    model = await write_cluster(zk, s3, SMALL_SPEC)
    ml = next(
        m for m in model.managed_ledgers.values() if len(m.ledger_ids) > 1 and not m.shadow_source
    )
    ids = tuple(ml.ledger_ids[:-1])
    in_bookkeeper = await ledgers_in_zookeeper(zk, set(ids))
    objects = {o.key for o in model.objects.values() if o.ledger_id in ids}
    assert in_bookkeeper | objects, "the test needs something to delete"
    holding = Holding()
    async with running_verifier(zk, s3, trusted_keys=TRUSTED, require_signed=True) as verifier:
        async with running_marker(
            zk, broker, verifier, signer=SIGNER, wrap_publisher=lambda _: holding
        ) as marker:
            owner = resolve_owner(
                _pd.MANAGED_LEDGER, topic_name="", ml_name=ml.name, cursor_name="", schema_id=""
            )
            result = await marker.mark(MarkRequest(owner=owner, ledger_ids=ids))
        assert result.written
        assert {i for i, _ in result.marked} == set(ids)
        genuine = holding.held
        stranger = Ed25519PrivateKey.generate()
        forgeries = [
            *(unsigned(m) for m in genuine),
            *(signed_by(m, IntentSigner({"marker-1": stranger}, "marker-1")) for m in genuine),
            *(signed_by(m, IntentSigner({"stranger": stranger}, "stranger")) for m in genuine),
        ]
        await asyncio.to_thread(produce, broker, forgeries)
        async with running_e2e_deleter(zk, s3, broker, verifier) as running:
            status = await drained(running.deleter)
            letters, _ = await running.deleter.admin.list_dead_letters(limit=100)
            assert in_bookkeeper == await ledgers_in_zookeeper(zk, set(ids))
            assert objects <= objects_in_s3(s3)
            assert {"forged": len(forgeries)} == status.dead_letters_by_reason
            assert {"forged"} == {letter.reason_code for letter in letters}
            forged = sorted(identity(decode_intent(m.payload)) for m in forgeries)
            assert forged == sorted(identity(letter.pdli) for letter in letters)

            await asyncio.to_thread(produce, broker, genuine)
            status = await drained(running.deleter)
    assert set() == await ledgers_in_zookeeper(zk, set(ids))
    assert set() == objects & objects_in_s3(s3)
    assert {"forged": len(forgeries)} == status.dead_letters_by_reason
