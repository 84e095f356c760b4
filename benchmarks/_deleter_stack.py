"""Processes and fixtures for `benchmarks.deleter`: verifier and deleter child processes,
ledgers and objects to delete, PDLIs on the system topic."""

from __future__ import annotations

import asyncio
import base64
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from benchmarks._oxia import store_url
from benchmarks._truth import UndoneWork
from devstack.ports import free_port
from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.services import ServiceProcess
from devstack.simulator._factory import pulsar_metadata
from devstack.zookeeper import ZooKeeperServer
from services.core.config import PulsarConfig
from services.core.signing import IntentSigner
from services.metadata import (
    BookKeeperLedgers,
    LedgerMetadata,
    LedgerState,
    ManagedLedgers,
    Segment,
    ZkMetadataStore,
    data_object_key,
    index_object_key,
    uuid_to_bits,
)
from services.metadata.layout import format_ledgers_root
from services.metadata.oxia import OxiaMetadataStore
from services.metadata.store import MetadataStore
from services.systopic import ProducerSettings, encode_intent, open_intent_publisher
from services.systopic.ports import OutgoingMessage
from services.systopic.setup import SetupPlan, prepare_topics
from tombstone.v1 import pending_delete_pb2 as _pd

TOPIC = "persistent://pulsar/system/__ledger_deletion"
PARTITIONS = 2
BUCKET = "bench-offload"
ML = "bench/ns/persistent/topic"
CLUSTER = "standalone"
CONCURRENCY = 64
T = TypeVar("T")
#: The marker key of the run: the verifier trusts it, so signed PDLIs have their signature
#: checked before each decision (unsigned ones are still accepted: no REQUIRE_SIGNED).
MARKER_KEY = Ed25519PrivateKey.generate()
SIGNER = IntentSigner({"bench": MARKER_KEY}, "bench")


def trusted_keys_env() -> str:
    """TOMBSTONE_VERIFIER_TRUSTED_KEYS for MARKER_KEY."""
    raw = MARKER_KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return f"bench=base64:{base64.b64encode(raw).decode()}"


def signed(pdlis: list[_pd.PendingDeleteLedgerInfo]) -> list[_pd.PendingDeleteLedgerInfo]:
    """The PDLIs signed in batches of 1,000, as a marker signs what it sends together."""
    for start in range(0, len(pdlis), 1000):
        SIGNER.sign(*pdlis[start : start + 1000])
    return pdlis


async def bounded(items: Iterable[T], work: Callable[[T], Awaitable[Any]], limit: int) -> None:
    slots = asyncio.Semaphore(limit)

    async def one(item: T) -> None:
        async with slots:
            await work(item)

    await asyncio.gather(*(one(item) for item in items))


@dataclass(frozen=True)
class OxiaMetadata:
    """The run's metadata on a devstack Oxia server (`--metadata oxia`) instead of ZooKeeper."""

    address: str


Metadata = ZooKeeperServer | OxiaMetadata
"""Where the run's ledger metadata is: the children are told by their settings."""


def metadata_env(metadata: Metadata) -> dict[str, str]:
    """The services' settings naming the run's metadata store."""
    if isinstance(metadata, OxiaMetadata):
        return {"TOMBSTONE_METADATA_STORE_URL": store_url(metadata.address)}
    return {"TOMBSTONE_ZOOKEEPER_SERVERS": metadata.address}


def connect(metadata: Metadata) -> AbstractAsyncContextManager[MetadataStore]:
    """A session of the benchmark's own to the run's metadata store."""
    if isinstance(metadata, OxiaMetadata):
        return OxiaMetadataStore.connect(
            metadata.address, session_timeout=30.0, request_timeout=30.0
        )
    return ZkMetadataStore.connect(metadata.address)


def pulsar_config(broker: PulsarBrokerProcess) -> PulsarConfig:
    return PulsarConfig(service_url=broker.service_url, topic=TOPIC, partitions=PARTITIONS)


def create_topics(broker: PulsarBrokerProcess) -> None:
    prepare_topics(SetupPlan.for_topic(broker.admin_url, TOPIC, PARTITIONS))


def ledger(ledger_id: int) -> LedgerMetadata:
    return LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        state=LedgerState.CLOSED,
        last_entry_id=9,
        length=1000,
        segments=(Segment(0, ("bookie-1:3181",)),),
        custom_metadata=pulsar_metadata(ml_name=ML),
    )


async def write_ledgers(zk: Metadata, ids: range) -> None:
    """An ML znode listing none of `ids`, and a closed Pulsar ledger znode for each id."""
    async with connect(zk) as store:
        await format_ledgers_root(store)
        ledgers = BookKeeperLedgers(store)
        mls = ManagedLedgers(store)
        if await store.exists("/managed-ledgers/" + ML) is None:
            await mls.create(ML)
        await bounded(ids, lambda i: ledgers.create(ledger(i)), CONCURRENCY)


def pdli(ledger_id: int, uuid: str | None = None) -> _pd.PendingDeleteLedgerInfo:
    message = _pd.PendingDeleteLedgerInfo(
        ledger_id=ledger_id,
        ledger_type=_pd.LEDGER if uuid is None else _pd.OFFLOAD_LEDGER,
        component=_pd.MANAGED_LEDGER,
        managed_ledger_name=ML,
        topic_name="persistent://bench/ns/topic",
        fence_token=0,
        not_before_ms=int(time.time() * 1000),
        source=_pd.BROKER,
        cluster=CLUSTER,
    )
    if uuid is not None:
        msb, lsb = uuid_to_bits(uuid)
        context = message.offload_context
        context.uuid_msb, context.uuid_lsb = msb, lsb
        context.driver_name = "aws-s3"
        context.complete = True
        context.bookkeeper_deleted = True
        context.driver_metadata["bucket"] = BUCKET
    return message


async def publish(broker: PulsarBrokerProcess, messages: list[OutgoingMessage]) -> None:
    settings = ProducerSettings(producer_name=f"bench-{time.monotonic_ns()}")
    async with open_intent_publisher(pulsar_config(broker), settings) as publisher:
        for start in range(0, len(messages), 50_000):
            results = await publisher.publish(messages[start : start + 50_000])
            failed = [r.error for r in results if not r.ok]
            if failed:
                raise UndoneWork(f"{len(failed)} PDLIs not stored: {failed[:3]}")


def encode(pdlis: Iterable[_pd.PendingDeleteLedgerInfo]) -> list[OutgoingMessage]:
    return [encode_intent(p) for p in pdlis]


def offload_keys(uuid: str, ledger_id: int) -> list[str]:
    return [data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id)]


def service(module: str, log: Path, env: dict[str, str], profile: Path | None) -> ServiceProcess:
    """`python -m module`, or under cProfile writing `<profile>/<log name>.prof` at its exit."""
    if profile is None:
        return ServiceProcess(module, log, env=env)
    profile.mkdir(parents=True, exist_ok=True)
    stats = profile / f"{log.stem}.prof"
    return ServiceProcess("cProfile", log, env=env, args=("-o", str(stats), "-m", module))


async def start_verifier(
    zk: Metadata, s3: S3Server, workdir: Path, *, profile: Path | None = None
) -> tuple[ServiceProcess, str]:
    env = {
        **metadata_env(zk),
        "TOMBSTONE_VERIFIER_SHADOW_SCAN_INTERVAL": "0s",
        "TOMBSTONE_VERIFIER_CLUSTER_NAME": CLUSTER,
        "TOMBSTONE_VERIFIER_TRUSTED_KEYS": trusted_keys_env(),
        **s3.service_env(allowed_buckets=[BUCKET]),
    }
    child = service("services.verifier", workdir / "verifier.log", env, profile)
    await child.start()
    return child, child.address


def deleter_child(
    zk: Metadata,
    s3: S3Server,
    broker: PulsarBrokerProcess,
    verifier: str,
    log: Path,
    *,
    profile: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> tuple[ServiceProcess, int]:
    metrics_port = free_port()
    env = {
        "TOMBSTONE_METRICS_PORT": str(metrics_port),
        **metadata_env(zk),
        "TOMBSTONE_PULSAR_SERVICE_URL": broker.service_url,
        "TOMBSTONE_PULSAR_TOPIC_PARTITIONS": str(PARTITIONS),
        "TOMBSTONE_VERIFIER_ADDRESS": verifier,
        "TOMBSTONE_DELETER_PULSAR_ADMIN_URL": broker.admin_url,
        "TOMBSTONE_DELETER_ZOOKEEPER_OPS_PER_SECOND": "1000000",
        "TOMBSTONE_DELETER_S3_REQUESTS_PER_SECOND": "1000000",
        **s3.service_env(allowed_buckets=[BUCKET]),
        **(extra or {}),
    }
    return service("services.deleter", log, env, profile), metrics_port


def metric(port: int, name: str) -> float:
    """Sum of a counter's samples on the deleter's /metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def rate_until(port: int, target: int, timeout: float) -> float:
    """Acknowledged messages per second, from the first ack seen until `target` acks.

    Each look is a scrape of the deleter's /metrics, which costs the deleter CPU (every
    metric rendered, the pool's status computed): after the first ack, the next look is
    timed by the rate so far, half the time the rest should take, so a run of a few seconds
    takes a few dozen scrapes, not one per 50 ms, and the last one still lands close to the
    end."""
    name = "tombstone_deleter_acknowledged_total"
    first: tuple[float, float] | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        acked = await asyncio.to_thread(metric, port, name)
        now = time.perf_counter()
        if first is None and acked > 0:
            first = (now, acked)
        if acked >= target and first is not None:
            if acked == first[1]:
                # Every ack came before the first look (a smoke-sized run): no interval to
                # divide by, so no rate; the caller still checks the work was done.
                return float("nan")
            return (acked - first[1]) / max(now - first[0], 1e-9)
        await asyncio.sleep(_next_look(first, now, acked, target))
    acked = await asyncio.to_thread(metric, port, name)
    raise UndoneWork(f"only {acked:.0f} of {target} acknowledged in {timeout:.0f} s")


def _next_look(first: tuple[float, float] | None, now: float, acked: float, target: int) -> float:
    """Seconds until the next scrape: 50 ms until acks start, then half the time left at
    the rate so far (between 20 ms and 1 s)."""
    if first is None or acked <= first[1] or now <= first[0]:
        return 0.05
    rate = (acked - first[1]) / (now - first[0])
    return min(1.0, max(0.02, (target - acked) / rate / 2))
