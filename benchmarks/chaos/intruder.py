"""Hostile and stray input: artifacts planted beside a run that nothing may delete (S2), and
messages put straight onto the system topic with the real pulsar-client — copies of the
marker's genuine PDLIs, forgeries (unsigned, or signed by a key the verifier does not trust)
and garbage bytes."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pulsar
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from benchmarks.load.workload import Workload
from devstack.simulator._factory import LedgerShape, pulsar_metadata
from devstack.simulator.s3 import ObjectStore
from services.core.errors import NotFound
from services.core.signing import IntentSigner
from services.metadata import LedgerPaths, LedgerState, data_object_key, index_object_key
from services.systopic import decode_intent, encode_intent
from services.systopic.ports import OutgoingMessage

TAP_SUBSCRIPTION = "chaos-tap"
"""A subscription of the harness's own on the system topic: it sees the marker's PDLIs."""
PLANTED_IDS = 1 << 20
"""Planted foreign ledgers take ids this far above the run's first workload ledger."""
_SEND_TIMEOUT_MS = 5000


@dataclass
class Planted:
    """What a run planted: znodes and objects no part may delete."""

    ledger_ids: list[int] = field(default_factory=list)
    objects: list[tuple[str, str]] = field(default_factory=list)
    """(bucket, key)."""


async def plant(
    workload: Workload, objects: ObjectStore, rng: random.Random, foreign_bucket: str
) -> Planted:
    """Foreign ledgers (a znode of an ML that lists none of them, and offloaded objects) and
    look-alike objects: the keys the run's first ledgers would have under another uuid, in
    the offload bucket and in a bucket the services may not touch."""
    planted = Planted()
    first = workload._next_id  # the run's next ledger id: the look-alikes shadow these
    ml_name = f"{workload.options.tenant}/foreign/persistent/unlisted"
    await objects.ensure_bucket(foreign_bucket)
    for i in range(3):
        ledger_id = first + PLANTED_IDS + i
        shape = LedgerShape(LedgerState.CLOSED, 10, 10 * 1024)
        metadata = workload.factory.ledger_metadata(
            ledger_id, shape, pulsar_metadata(ml_name=ml_name)
        )
        await workload.bk.create(metadata, container_parents=True)
        planted.ledger_ids.append(ledger_id)
        offload = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        for key in (data_object_key(offload, ledger_id), index_object_key(offload, ledger_id)):
            planted.objects.append((workload.bucket, key))
    for i in range(6):
        other = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        key = data_object_key(other, first + i)
        planted.objects += [(workload.bucket, key), (foreign_bucket, key)]
    for bucket, key in planted.objects:
        await objects.put_object(bucket=bucket, key=key, body=b"planted", metadata={})
    return planted


async def check_s2(workload: Workload, objects: ObjectStore, planted: Planted) -> list[str]:
    """Every planted artifact still there."""
    violations = []
    for ledger_id in planted.ledger_ids:
        path = LedgerPaths().ledger_path(ledger_id)
        if await workload.store.exists(path) is None:
            violations.append(f"S2: planted ledger {ledger_id} deleted: {path}")
    for bucket, key in planted.objects:
        try:
            await objects.head_metadata(bucket=bucket, key=key)
        except NotFound:
            violations.append(f"S2: planted object deleted: {bucket}/{key}")
    return violations


class Intruder:
    """Puts messages on the system topic as an attacker (or a confused producer) would.
    Blocking calls: run them on a thread."""

    def __init__(self, service_url: str, topic: str) -> None:
        self.service_url = service_url
        self.topic = topic
        self.stranger = Ed25519PrivateKey.generate()
        self.genuine: list[OutgoingMessage] = []

    def _client(self) -> pulsar.Client:
        return pulsar.Client(
            self.service_url,
            operation_timeout_seconds=10,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        )

    def subscribe_tap(self) -> None:
        """Create the tap subscription (from the start of the topic), so later taps see
        every PDLI the marker publishes from now on."""
        client = self._client()
        try:
            client.subscribe(
                self.topic, TAP_SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared,
                initial_position=pulsar.InitialPosition.Latest,
            ).close()  # fmt: skip
        finally:
            client.close()

    def tap(self, limit: int = 50) -> int:
        """Read up to `limit` of the marker's messages off the tap; they are kept as
        material for duplicates and forgeries. Returns how many were read."""
        client = self._client()
        read = 0
        try:
            consumer = client.subscribe(
                self.topic, TAP_SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared
            )
            while read < limit:
                try:
                    message = consumer.receive(timeout_millis=300)
                except pulsar.Timeout:
                    break
                consumer.acknowledge(message)
                props = message.properties()
                key = message.partition_key()
                self.genuine.append(OutgoingMessage(message.data(), key, props))
                read += 1
            consumer.close()
        finally:
            client.close()
        self.genuine = self.genuine[-500:]
        return read

    def _produce(self, messages: list[tuple[bytes, dict[str, str], str]]) -> None:
        client = self._client()
        try:
            producer = client.create_producer(self.topic, send_timeout_millis=_SEND_TIMEOUT_MS)
            for payload, properties, key in messages:
                producer.send(payload, properties=properties, partition_key=key or None)
            producer.flush()
        finally:
            client.close()

    def duplicates(self, rng: random.Random, count: int) -> int:
        """Copies of genuine PDLIs, byte for byte."""
        self.tap()
        if not self.genuine:
            return 0
        chosen = [rng.choice(self.genuine) for _ in range(count)]
        self._produce([(m.payload, dict(m.properties), m.partition_key) for m in chosen])
        return len(chosen)

    def forgeries(self, rng: random.Random, targets: list[int], count: int) -> int:
        """PDLIs naming `targets` (planted foreign ledgers, or ledgers still listed): copies
        of genuine ones with the ledger id changed, then left unsigned, signed by an untrusted
        key under the marker's key id, or by an unknown key id."""
        self.tap()
        if not self.genuine or not targets:
            return 0
        out = []
        for _ in range(count):
            pdli = decode_intent(rng.choice(self.genuine).payload)
            pdli.ledger_id = rng.choice(targets)
            key_id = pdli.signing_key_id or "devstack"
            pdli.ClearField("signing_key_id")
            pdli.ClearField("signature")
            way = rng.randrange(3)
            signer = (
                None if way == 0
                else IntentSigner({key_id: self.stranger}, key_id) if way == 1
                else IntentSigner({"stranger": self.stranger}, "stranger")
            )  # fmt: skip
            message = encode_intent(pdli, signer)
            out.append((message.payload, dict(message.properties), message.partition_key))
        self._produce(out)
        return len(out)

    def garbage(self, rng: random.Random, count: int) -> int:
        """Random bytes, some with a genuine message's properties."""
        out = []
        for _ in range(count):
            payload = rng.randbytes(rng.randrange(1, 200))
            props = (
                dict(rng.choice(self.genuine).properties)
                if self.genuine and rng.random() < 0.5
                else {}
            )
            out.append((payload, props, str(rng.getrandbits(40))))
        self._produce(out)
        return len(out)
