"""The generator's building blocks: one seeded RNG, the id allocator, record factories.

Every random choice goes through `Factory.rng`, in a fixed order, so a spec always yields the
same model. Nothing here does I/O.
"""

from __future__ import annotations

import random
import uuid
import zlib
from dataclasses import dataclass

from devstack.simulator.model import (
    ClusterModel,
    Ledger,
    LedgerKind,
    Offload,
    OffloadObject,
)
from devstack.simulator.spec import FIRST_LONG_LEDGER_ID, ClusterSpec, IdLayout, OffloadDriver
from services.metadata import (
    DigestType,
    LedgerMetadata,
    LedgerState,
    Segment,
    data_object_key,
    index_object_key,
)
from services.metadata.ledger_metadata import (
    APPLICATION_PULSAR,
    COMPONENT_MANAGED_LEDGER,
    COMPONENT_SCHEMA,
    KEY_APPLICATION,
    KEY_COMPONENT,
    KEY_CURSOR,
    KEY_MANAGED_LEDGER,
    KEY_SCHEMA_ID,
)
from services.metadata.offload import (
    PROP_BUCKET,
    PROP_DRIVER,
    PROP_REGION,
    PROP_SERVICE_ENDPOINT,
    PROP_STORAGE_BASE_PATH,
)

# What the offloaded objects say wrote them (user metadata, reference §7.1).
PULSAR_VERSION = "4.0.4"
# The versions legacy objects name: 2.1 (`S3ManagedLedgerOffloader`) and 2.9 (before PR #14907).
PULSAR_2_1_VERSION = "2.1.1-incubating"
PULSAR_2_9_VERSION = "2.9.5"
PULSAR_GIT_SHA = "5b3b4b2c5a1d8f0e9c7a6b5d4c3b2a1908f7e6d5"
# The provider enum name Pulsar writes as `managedLedgerOffloadDriver` for `aws-s3`.
S3_PROVIDER_ENUM = "AWS_S3"

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


class IdAllocator:
    """Hands out ledger ids in allocation order, as BookKeeper's ZK generators would.

    Short ids count up from 0 (`idgen/ID-<seq>`), long ones from 2^32 (`idgen-long/HOB-1`).
    With MIXED ids the first `switch_at` allocations are short.
    """

    def __init__(self, layout: IdLayout, switch_at: int = 0, start: int = 0) -> None:
        self.layout = layout
        self.switch_at = switch_at
        self.count = 0
        self.short_count = start
        self.long_count = 0

    def next(self) -> int:
        use_long = self.layout is IdLayout.LONG or (
            self.layout is IdLayout.MIXED and self.count >= self.switch_at
        )
        self.count += 1
        if use_long:
            self.long_count += 1
            return FIRST_LONG_LEDGER_ID + self.long_count - 1
        self.short_count += 1
        return self.short_count - 1


def pulsar_metadata(
    *,
    ml_name: str | None = None,
    cursor: str | None = None,
    schema_id: str | None = None,
) -> dict[str, bytes]:
    """The custom metadata Pulsar puts on a data, cursor or schema ledger (reference §4)."""
    meta = {KEY_APPLICATION: APPLICATION_PULSAR.encode()}
    if schema_id is not None:
        meta[KEY_COMPONENT] = COMPONENT_SCHEMA.encode()
        meta[KEY_SCHEMA_ID] = schema_id.encode()
        return meta
    meta[KEY_COMPONENT] = COMPONENT_MANAGED_LEDGER.encode()
    meta[KEY_MANAGED_LEDGER] = (ml_name or "").encode()
    if cursor is not None:
        meta[KEY_CURSOR] = cursor.encode()
    return meta


@dataclass(frozen=True)
class LedgerShape:
    """Size and state of a ledger to create."""

    state: LedgerState
    entries: int = 0
    length: int = 0


class Factory:
    """Shared state of one generation run."""

    def __init__(self, spec: ClusterSpec, ids: IdAllocator) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.ids = ids
        bookies = tuple(f"bookie-{i}.pulsar.local:3181" for i in range(spec.bookies))
        self.model = ClusterModel(
            spec=spec, instance_id=self.new_uuid(), bookies=bookies, ledgers={}
        )

    def new_uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def closed_shape(self) -> LedgerShape:
        entries = self.rng.randint(1, 5000)
        return LedgerShape(LedgerState.CLOSED, entries, entries * self.rng.randint(100, 2000))

    def segments(self, shape: LedgerShape) -> tuple[Segment, ...]:
        """One ensemble; sometimes a second one after an ensemble change mid-ledger."""
        bookies = list(self.model.bookies)
        ensemble = self.rng.sample(bookies, self.spec.ensemble_size)
        first = Segment(0, tuple(ensemble))
        spare = [b for b in bookies if b not in ensemble]
        if shape.entries < 100 or not spare or self.rng.random() >= 0.1:
            return (first,)
        replaced = list(ensemble)
        replaced[self.rng.randrange(len(replaced))] = self.rng.choice(spare)
        return first, Segment(shape.entries // 2, tuple(replaced))

    def ledger_metadata(
        self, ledger_id: int, shape: LedgerShape, custom: dict[str, bytes]
    ) -> LedgerMetadata:
        v2 = self.rng.random() < self.spec.v2_share
        size = self.spec.ensemble_size
        closed = shape.state is LedgerState.CLOSED
        return LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=size,
            write_quorum=size,
            ack_quorum=size,
            state=shape.state,
            length=shape.length if closed else 0,
            last_entry_id=shape.entries - 1 if closed else -1,
            segments=self.segments(shape),
            digest_type=DigestType.CRC32C,
            password=b"",
            custom_metadata=custom,
            # v2 (TextFormat) has no creator token; v3 carries a random signed long.
            ctoken=0 if v2 else self.rng.getrandbits(64) - 2**63,
            format_version=2 if v2 else 3,
        )

    def add_ledger(
        self,
        kind: LedgerKind,
        owner: str,
        shape: LedgerShape,
        custom: dict[str, bytes],
        *,
        cursor: str | None = None,
        referenced: bool = True,
        young: bool = False,
    ) -> Ledger:
        """Allocate the next id and record the ledger (in BookKeeper until said otherwise)."""
        ledger_id = self.ids.next()
        ledger = Ledger(
            metadata=self.ledger_metadata(ledger_id, shape, custom),
            kind=kind,
            owner=owner,
            cursor=cursor,
            in_bookkeeper=True,
            referenced=referenced,
            young=young,
        )
        self.model.ledgers[ledger_id] = ledger
        return ledger

    def driver(self, ml_name: str | None = None) -> tuple[str, tuple[tuple[str, str], ...], str]:
        """(driver name, driverMetadata properties, bucket or base path) of an offload of
        `ml_name` (its namespace's offload policy)."""
        spec = self.spec
        if spec.offload_driver is OffloadDriver.FILESYSTEM:
            return (
                "filesystem",
                ((PROP_STORAGE_BASE_PATH, spec.filesystem_base),),
                (spec.filesystem_base),
            )
        bucket, region, endpoint = self.location(ml_name)
        props = (
            (PROP_DRIVER, S3_PROVIDER_ENUM),
            (PROP_BUCKET, bucket),
            (PROP_REGION, region),
            (PROP_SERVICE_ENDPOINT, endpoint),
        )
        return OffloadDriver.S3.value, props, bucket

    def location(self, ml_name: str | None) -> tuple[str, str, str]:
        """(bucket, region, endpoint) the offload policy of `ml_name`'s namespace names: the
        second location for `second_location_share` of the namespaces, else the cluster's."""
        spec = self.spec
        if ml_name and spec.second_location_share:
            tenant, namespace = ml_name.split("/")[:2]
            draw = zlib.crc32(f"{tenant}/{namespace}".encode()) / 2**32
            if draw < spec.second_location_share:
                return spec.second_bucket, spec.second_region or spec.region, spec.second_endpoint
        return spec.bucket, spec.region, spec.service_endpoint

    def offload(
        self, closed_at: int, *, bookkeeper_deleted: bool, ml_name: str | None = None
    ) -> Offload:
        name, props, bucket = self.driver(ml_name)
        done = min(closed_at + self.rng.randint(10 * 60_000, 2 * HOUR_MS), self.spec.epoch_ms)
        return Offload(
            uuid=self.new_uuid(),
            complete=True,
            bookkeeper_deleted=bookkeeper_deleted,
            timestamp=done,
            driver_name=name,
            driver_properties=props,
            bucket=bucket,
        )

    def offload_2_1(self) -> Offload:
        """An OffloadContext as Pulsar 2.1 wrote it: uidMsb/uidLsb/complete only (no timestamp,
        no driverMetadata: `OffloadDriverMetadata` came with 2.2.0)."""
        return Offload(
            uuid=self.new_uuid(),
            complete=True,
            bookkeeper_deleted=False,
            timestamp=0,
            driver_name="",
            driver_properties=(),
            bucket="",
        )

    def add_objects(
        self,
        source: Ledger,
        offload_uuid: str,
        ml_name: str,
        *,
        cluster_name: str | None = None,
        written_by: str = PULSAR_VERSION,
    ) -> tuple[str, ...]:
        """Record the data and index objects of an S3 offload; return their keys.

        `written_by` is the Pulsar version of the offloader: before 2.10 the objects carry
        only the `s3managedledgeroffloader*` keys. Filesystem offloads write no objects (the
        simulator keeps no Hadoop MapFiles).
        """
        if self.spec.offload_driver is not OffloadDriver.S3:
            return ()
        cluster = cluster_name or self.spec.cluster_name
        # A 2.1 context names no bucket (the operator's default holds its objects); another
        # cluster's look-alikes sit in the cluster's own bucket.
        bucket = self.spec.bucket
        if written_by != PULSAR_2_1_VERSION and cluster_name is None:
            bucket = self.location(ml_name)[0]
        keys = (
            data_object_key(offload_uuid, source.ledger_id),
            index_object_key(offload_uuid, source.ledger_id),
        )
        for key, role in zip(keys, ("data", "index"), strict=True):
            self.model.objects[key] = OffloadObject(
                bucket=bucket,
                key=key,
                role=role,
                ledger_id=source.ledger_id,
                uuid=offload_uuid,
                ml_name=ml_name,
                cluster_name=cluster,
                user_metadata=object_user_metadata(cluster, role, ml_name, written_by),
                source=source,
            )
        return keys


def object_user_metadata(
    cluster: str, role: str, ml_name: str, written_by: str = PULSAR_VERSION
) -> dict[str, str]:
    """The user metadata the blob-store offloader puts on both objects.

    The version keys since 2.1 (`S3ManagedLedgerOffloader`, later
    `BlobStoreManagedLedgerOffloader`); `pulsarclustername`, `role` and `ManagedLedgerName`
    only since 2.10 (PR #14907).
    """
    metadata = {
        "s3managedledgeroffloaderformatversion": "1",
        "s3managedledgeroffloadersoftwareversion": written_by,
        "s3managedledgeroffloadersoftwaregitsha": PULSAR_GIT_SHA,
    }
    if written_by in (PULSAR_2_1_VERSION, PULSAR_2_9_VERSION):
        return metadata
    return {**metadata, "pulsarclustername": cluster, "role": role, "ManagedLedgerName": ml_name}
