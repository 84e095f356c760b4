"""Offloaded copies left by old Pulsar versions, end to end: the real ZooKeeper, moto S3 over
HTTP, the devstack broker, and the marker, verifier and deleter's own code.

Fixtures follow Pulsar's source:
- a Pulsar 2.1 offload context carries only `uidMsb/uidLsb/complete` (`ManagedLedgerImpl
  .offloadLoop` of 2.1; `driverMetadata` arrived in 2.2.0), and its ledger, created before
  2.2, has no custom metadata, so its index object names no ML either;
- objects written before Pulsar 2.10 carry only the `s3managedledgeroffloader*` version keys
  (`BlobStoreManagedLedgerOffloader.addVersionInfo`, before PR #14907); their index object
  (`OffloadIndexBlockImpl.toStream`) holds the ledger's `LedgerMetadataFormat`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from aiobotocore.session import get_session
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from devstack.pulsar import PulsarBrokerProcess
from devstack.s3 import S3Server
from devstack.zookeeper import ZooKeeperServer
from services.core.config import GrpcServerConfig, OffloadDefaults, ZooKeeperConfig
from services.core.signing import IntentSigner, TrustedKeys
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.namespaces import encode_policies, namespace_of_ml, policies_path
from services.metadata.offload import uuid_to_bits
from services.metadata.pulsar_formats import ManagedLedgerInfo, encode_managed_ledger_info
from services.metadata.pulsar_names import managed_ledger_path
from services.metadata.zookeeper.store import ZkMetadataStore
from services.systopic import encode_intent
from services.verifier.app import VerifierParts, open_verifier
from services.verifier.config import VerifierConfig
from services.verifier.offload import OffloadPolicy
from tests.deleter.stack import (
    BUCKET,
    CLUSTER,
    create_topics,
    drained,
    running_e2e_deleter,
    running_marker,
    s3_config,
)
from tests.deleter_e2e.checks import objects_in_s3
from tests.deleter_e2e.test_bad_input import publish
from tests.helpers import assert_eventually
from tests.verifier.legacy_objects import put_pre_210_objects
from tombstone.v1 import pending_delete_pb2 as _pd

ML = "public/legacy/persistent/orders"
GHOST_ML = "public/legacy/persistent/ghost"
UUID = "7a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d"
LAYOUT = b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1"


@asynccontextmanager
async def verifier_with(
    zk: ZooKeeperServer, s3: S3Server, *, default_bucket: str | None, **settings: Any
) -> AsyncIterator[tuple[str, VerifierParts]]:
    """A verifier allowing BUCKET, with or without a default offload bucket; `settings`
    are further VerifierConfig fields (signature settings)."""
    config = VerifierConfig(
        grpc=GrpcServerConfig(port=0),
        zookeeper=ZooKeeperConfig(servers=zk.address),
        s3=s3_config(s3),
        offload=OffloadPolicy(
            allowed_buckets=frozenset({BUCKET}), default_bucket=default_bucket, cluster_name=CLUSTER
        ),
        shadow_scan_interval=timedelta(0),
        **settings,
    )
    async with open_verifier(config) as (runner, parts):
        await runner.start()
        serving = asyncio.create_task(runner.run())
        try:
            yield f"127.0.0.1:{runner.port}", parts
        finally:
            runner.request_stop()
            await serving


async def write_owner(zk: ZooKeeperServer, *, driver: dict[str, str] | None) -> None:
    """The ML lists ledger 1 (offloaded, its BookKeeper copy already gone: no ledger znode
    under a ledgers root whose LAYOUT exists) and ledger 2 (its current ledger).
    `driver` None writes the context as Pulsar 2.1 did. The namespace's policies are there, as
    `NamespacesBase.internalCreateNamespace` leaves them before any topic exists."""
    info = ManagedLedgerInfo()
    old = info.ledgerInfo.add(ledgerId=1, entries=10, size=1000, timestamp=1_600_000_000_000)
    ctx = old.offloadContext
    ctx.uidMsb, ctx.uidLsb = uuid_to_bits(UUID)
    ctx.complete = True
    if driver is not None:
        ctx.driverMetadata.name = "aws-s3"
        for key, value in driver.items():
            ctx.driverMetadata.properties.add(key=key, value=value)
    info.ledgerInfo.add(ledgerId=2, timestamp=0)
    async with ZkMetadataStore.connect(zk.address) as store:
        await store.create("/ledgers/LAYOUT", LAYOUT, make_parents=True)
        policies = policies_path(namespace_of_ml(ML))
        await store.create(policies, encode_policies([CLUSTER]), make_parents=True)
        await store.create(
            managed_ledger_path(ML), encode_managed_ledger_info(info), make_parents=True
        )


async def put_objects(s3: S3Server, *, index_names: str | None, uuid: str = UUID) -> set[str]:
    """Pre-2.10 objects of ledger 1 in BUCKET (created if needed)."""
    async with get_session().create_client("s3", **s3.client_config()) as client:
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            await client.create_bucket(Bucket=BUCKET)
        keys = await put_pre_210_objects(
            client, bucket=BUCKET, uuid=uuid, ledger_id=1, index_names=index_names
        )
    return set(keys)


async def trim_ledger_1(
    zk: ZooKeeperServer,
    broker: PulsarBrokerProcess,
    verifier: tuple[str, VerifierParts] | None,
    **settings: Any,
) -> None:
    """Mark ledger 1 through the marker; with a verifier, wait for its believed report."""
    owner = resolve_owner(
        _pd.MANAGED_LEDGER, topic_name="", ml_name=ML, cursor_name="", schema_id=""
    )
    address = verifier[0] if verifier is not None else None
    async with running_marker(zk, broker, address, **settings) as marker:
        result = await marker.mark(MarkRequest(owner=owner, ledger_ids=(1,)))
        assert result.marked == [(1, (_pd.LEDGER, _pd.OFFLOAD_LEDGER))]
        if verifier is not None:
            parts = verifier[1]

            async def believed() -> None:
                assert len(parts.believed) >= 2  # reports are best effort: wait for them

            await assert_eventually(believed, timeout=20)


async def delete_all(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess, verifier: str
) -> dict[str, int]:
    async with running_e2e_deleter(zk, s3, broker, verifier) as running:
        await drained(running.deleter)

        async def settled() -> dict[str, int]:
            status = await running.deleter.admin.status()
            assert (status.system_topic_backlog, status.retry_topic_backlog) == (0, 0)
            return status.dead_letters_by_reason

        return await assert_eventually(settled, timeout=30)


async def test_a_21_context_is_deleted_from_the_default_bucket(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """A Pulsar 2.1 context (no driver metadata) trimmed through a marker configured with
    TOMBSTONE_OFFLOAD_DEFAULT_BUCKET: the PDLI names the default bucket, and the objects
    (pre-2.2 ledger: no owner anywhere on them) go on the marker's believed report."""
    create_topics(broker)
    await write_owner(zk, driver=None)
    keys = await put_objects(s3, index_names=None)
    async with verifier_with(zk, s3, default_bucket=BUCKET) as running:
        defaults = OffloadDefaults(bucket=BUCKET)
        await trim_ledger_1(zk, broker, running, offload_defaults=defaults)
        dead = await delete_all(zk, s3, broker, running[0])
    assert set() == objects_in_s3(s3) & keys
    assert dead == {}


async def test_a_21_context_without_a_default_is_dead_lettered_unsupported(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Without a default bucket nothing says where a 2.1 context's objects are: the PDLI
    ends in the DLQ as `unsupported`, never acknowledged, and the objects stay."""
    create_topics(broker)
    await write_owner(zk, driver=None)
    keys = await put_objects(s3, index_names=None)
    async with verifier_with(zk, s3, default_bucket=None) as running:
        await trim_ledger_1(zk, broker, running)
        dead = await delete_all(zk, s3, broker, running[0])
    assert keys == objects_in_s3(s3) & keys
    assert dead == {"unsupported": 1}


async def test_pre_210_objects_are_deleted_when_their_index_names_the_owner(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Objects with version keys only, trimmed through a marker that sends no believed
    report: the index object's segment metadata naming the ML is the proof."""
    create_topics(broker)
    await write_owner(zk, driver={"bucket": BUCKET, "region": "", "serviceEndpoint": ""})
    keys = await put_objects(s3, index_names=ML)
    async with verifier_with(zk, s3, default_bucket=None) as (verifier, _parts):
        await trim_ledger_1(zk, broker, None)
        dead = await delete_all(zk, s3, broker, verifier)
    assert set() == objects_in_s3(s3) & keys
    assert dead == {}


async def test_pre_210_objects_of_a_pre_22_ledger_are_deleted_on_a_signed_intent(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """Objects with version keys only whose index names no owner (the ledger predates
    Pulsar 2.2: no custom metadata), trimmed through a signing marker that sends no believed
    report, to a verifier requiring signatures: the signed intent read from the owner's
    unlink is the proof, and both objects go."""
    create_topics(broker)
    await write_owner(zk, driver={"bucket": BUCKET, "region": "", "serviceEndpoint": ""})
    keys = await put_objects(s3, index_names=None)
    key = Ed25519PrivateKey.generate()
    signer = IntentSigner({"marker-1": key}, "marker-1")
    trusted = TrustedKeys({"marker-1": key.public_key()})
    async with verifier_with(
        zk, s3, default_bucket=None, trusted_keys=trusted, require_signed=True
    ) as (verifier, _parts):
        await trim_ledger_1(zk, broker, None, signer=signer)
        dead = await delete_all(zk, s3, broker, verifier)
    assert set() == objects_in_s3(s3) & keys
    assert dead == {}


async def test_pre_210_objects_of_a_pre_22_ledger_stay_on_an_unsigned_intent(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """The same objects trimmed by a marker that does not sign, with no believed report:
    nothing proves the owner's unlink, so nothing is deleted and the PDLI is not
    acknowledged: it ends in the DLQ as `mismatch`."""
    create_topics(broker)
    await write_owner(zk, driver={"bucket": BUCKET, "region": "", "serviceEndpoint": ""})
    keys = await put_objects(s3, index_names=None)
    async with verifier_with(zk, s3, default_bucket=None) as (verifier, _parts):
        await trim_ledger_1(zk, broker, None)
        dead = await delete_all(zk, s3, broker, verifier)
    assert keys == objects_in_s3(s3) & keys
    assert dead == {"mismatch": 1}


async def test_a_forged_pdli_for_listed_pre_210_objects_deletes_nothing(
    zk: ZooKeeperServer, s3: S3Server, broker: PulsarBrokerProcess
) -> None:
    """A PDLI naming a non-existent owner for objects the ML still lists (pre-2.10: the
    objects name no owner): with an index naming the real owner, and with an index of a
    pre-2.2 ledger that names none. Nothing is deleted; both PDLIs are dead-lettered as
    `mismatch`."""
    create_topics(broker)
    await write_owner(zk, driver={"bucket": BUCKET})
    keys = await put_objects(s3, index_names=ML)
    other_uuid = "0f0e0d0c-0b0a-4909-8807-060504030201"
    keys |= await put_objects(s3, index_names=None, uuid=other_uuid)

    def forged(uuid: str) -> _pd.PendingDeleteLedgerInfo:
        msb, lsb = uuid_to_bits(uuid)
        context = _pd.OffloadContext(
            uuid_msb=msb, uuid_lsb=lsb, driver_name="aws-s3", complete=True
        )
        context.driver_metadata["bucket"] = BUCKET
        return _pd.PendingDeleteLedgerInfo(
            ledger_id=1,
            ledger_type=_pd.OFFLOAD_LEDGER,
            component=_pd.MANAGED_LEDGER,
            managed_ledger_name=GHOST_ML,
            offload_context=context,
            fence_token=0,
            source=_pd.BROKER,
            cluster=CLUSTER,
        )

    await publish(broker, [encode_intent(forged(UUID)), encode_intent(forged(other_uuid))])
    async with verifier_with(zk, s3, default_bucket=None) as (verifier, _parts):
        dead = await delete_all(zk, s3, broker, verifier)
    assert keys == objects_in_s3(s3) & keys
    assert dead == {"mismatch": 2}
