"""What cluster to simulate: every knob of the generator, frozen and validated.

The same `ClusterSpec` (and so the same seed) always produces the same model and the same
bytes in ZooKeeper and S3; see `generate.build_model`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from services.core.errors import InvalidArgument
from services.metadata.paths import LedgerLayout

# A fixed "now" for everything written *inside* the metadata (close times, offload times,
# cursor activity): wall-clock time would make two runs differ. 2026-01-01T00:00:00Z.
DEFAULT_EPOCH_MS = 1_767_225_600_000

# The first id of BookKeeper's 63-bit generator: HOB 1, sequence 0 (`idgen-long`).
FIRST_LONG_LEDGER_ID = 1 << 32


class IdLayout(enum.StrEnum):
    """How ledger ids are allocated (reference §1.4)."""

    SHORT = "short"  # 31-bit ids from `<root>/idgen` only
    LONG = "long"  # 63-bit ids from `<root>/idgen-long` only (first id 4294967296)
    MIXED = "mixed"  # short ids first, then long ones, as a cluster that crossed the switch


class Compression(enum.StrEnum):
    """Compression of ManagedLedgerInfo / ManagedCursorInfo znodes (reference §5.3)."""

    NONE = "NONE"
    LZ4 = "LZ4"
    ZLIB = "ZLIB"
    ZSTD = "ZSTD"
    SNAPPY = "SNAPPY"


class OffloadDriver(enum.StrEnum):
    """Which tiered-storage driver offloaded the ledgers (reference §7)."""

    S3 = "aws-s3"
    FILESYSTEM = "filesystem"


class PathWriter(enum.StrEnum):
    """Who wrote the ledger znodes, so at which path each one sits (reference §1.1, §1.2)."""

    PULSAR = "pulsar"
    """Pulsar >= 2.10's default driver (`PulsarLedgerManager`): hybrid paths whatever LAYOUT
    says."""
    BOOKKEEPER = "bookkeeper"
    """BookKeeper's own ZK ledger manager, the one LAYOUT names (older brokers, bookies,
    brokers configured with `zk+longhierarchical://` or an old flat layout)."""
    MIXED = "mixed"
    """The older half by BookKeeper's manager, the newer half by Pulsar >= 2.10: a cluster
    upgraded in place."""


@dataclass(frozen=True)
class OrphanPlan:
    """How many of each orphan and look-alike to plant. All zero means a clean cluster."""

    unlisted_data: int = 0
    """Data ledgers whose topic exists but does not list them (a trim that never deleted)."""
    deleted_topic: int = 0
    """Ledgers whose topic (ML znode) no longer exists."""
    stale_cursor: int = 0
    """Cursor ledgers of a cursor that moved on to a newer ledger."""
    unlisted_schema: int = 0
    """Schema ledgers not in their locator's index (a lost locator CAS)."""
    unreferenced_offload: int = 0
    """Offload object pairs whose (uuid, ledger id) no ledger lists."""
    bk_after_offload: int = 0
    """Listed ledgers with `bookkeeperDeleted` whose BookKeeper znode is still there."""
    young: int = 0
    """Look-alike: unreferenced Pulsar ledgers that are too young to judge."""
    no_pulsar_metadata: int = 0
    """Look-alike: ledgers without Pulsar custom metadata (DistributedLog and the like)."""
    shadow_referenced: int = 0
    """Look-alike: ledgers the source topic dropped but a shadow topic still lists."""
    other_cluster_objects: int = 0
    """Look-alike: offload object pairs written by another Pulsar cluster."""

    @classmethod
    def some(cls, n: int = 1) -> OrphanPlan:
        """`n` of every kind: the demo's and the tests' default."""
        return cls(*([n] * 10))

    def total(self) -> int:
        return sum(vars(self).values())


@dataclass(frozen=True)
class LegacyPlan:
    """How many of each legacy artifact to seed (the table at the end of the formats
    reference, "What real Pulsar leaves behind"). All zero: artifacts of a current broker only.

    Artifacts already planted by `OrphanPlan` are not repeated here: a broker-style trim whose
    deletes failed (`unlisted_data`), `bookkeeperDeleted=true` with the BookKeeper copy still
    present (`bk_after_offload`), shadow topics (`shadow_referenced`); and stale cursor
    ledgers (`stale_cursor`) are left OPEN, as Pulsar leaves them.
    """

    open_cursor_unsubscribed: int = 0
    """Cursor ledgers left OPEN by an unsubscribe: the cursor znode is gone and the ledger
    deleted by id without closing (`ManagedCursorImpl.asyncDeleteCursorLedger`) failed."""
    pre_2_2_ledgers: int = 0
    """Listed, closed data ledgers without Pulsar custom metadata (created by Pulsar <= 2.2;
    the keys came with `LedgerMetadataUtils`, 2.3.0)."""
    offload_2_1: int = 0
    """Listed ledgers offloaded by Pulsar 2.1: no custom metadata, an OffloadContext with only
    uidMsb/uidLsb/complete (no driverMetadata), objects with only the version keys."""
    objects_pre_2_10: int = 0
    """Listed ledgers offloaded by Pulsar 2.7-2.9: driverMetadata present, objects without
    `managedledgername` / `pulsarclustername` / `role` (PR #14907 came with 2.10)."""

    @classmethod
    def some(cls, n: int = 1) -> LegacyPlan:
        return cls(n, n, n, n)

    def total(self) -> int:
        return sum(vars(self).values())


@dataclass(frozen=True)
class ClusterSpec:
    """A simulated Pulsar cluster. Shares are fractions in [0, 1]."""

    seed: int = 1
    tenants: int = 2
    namespaces_per_tenant: int = 2
    topics_per_namespace: int = 3
    partitioned_share: float = 0.3
    """Share of topics that are partitioned; each partition is its own managed ledger."""
    partitions: tuple[int, int] = (2, 4)
    """Inclusive range of partition counts of partitioned topics."""
    ledgers_per_topic: tuple[int, int] = (2, 5)
    """Inclusive range of ledgers listed per managed ledger (the last one is open)."""
    cursors_per_topic: tuple[int, int] = (0, 2)
    offloaded_share: float = 0.3
    """Share of closed ledgers that are offloaded (complete)."""
    bookkeeper_deleted_share: float = 0.5
    """Share of offloaded ledgers whose BookKeeper copy is already gone."""
    schema_share: float = 0.5
    """Share of topics with a schema."""
    schema_versions: tuple[int, int] = (1, 3)
    new_topic_share: float = 0.05
    """Share of topics just created: an ML znode with 0-byte data and no ledgers."""
    offload_driver: OffloadDriver = OffloadDriver.S3
    id_layout: IdLayout = IdLayout.SHORT
    long_id_share: float = 0.5
    """With MIXED ids, the share of ledgers allocated after the switch to 63-bit ids."""
    cluster_name: str = "standalone"
    compression: Compression = Compression.NONE
    compression_threshold: int = 0
    """Compress ML/cursor znodes only above this size (Pulsar 3.1+ uses 16384; 0: always)."""
    v2_share: float = 0.0
    """Share of ledgers whose znode uses metadata format v2 (text); the rest use v3."""
    bookies: int = 3
    ensemble_size: int = 2
    epoch_ms: int = DEFAULT_EPOCH_MS
    orphans: OrphanPlan = field(default_factory=OrphanPlan)
    legacy: LegacyPlan = field(default_factory=LegacyPlan)
    layout: LedgerLayout = LedgerLayout.HIERARCHICAL
    """What `<ledgers root>/LAYOUT` names (BookKeeper's `LedgerLayout.serialize`)."""
    path_writer: PathWriter = PathWriter.PULSAR
    """Who wrote the ledger znodes: their paths follow `layout` only for BookKeeper's manager."""
    ledgers_root: str = "/ledgers"
    bucket: str = "pulsar-offload"
    region: str = "us-east-1"
    service_endpoint: str = ""
    """The offloader's configured endpoint, written into driverMetadata."""
    second_bucket: str = ""
    """A second offload location (Pulsar's per-namespace offload policies: `offload_policies`
    with their own `s3ManagedLedgerOffloadBucket`, region and endpoint): its bucket."""
    second_region: str = ""
    """Its region ('' is `region`)."""
    second_endpoint: str = ""
    """Its endpoint, written into driverMetadata (`serviceEndpoint`)."""
    second_location_share: float = 0.0
    """Share of namespaces whose offload policy names the second location (drawn per namespace
    from its name, so the rest of the model does not change with it)."""
    filesystem_base: str = "file:///tmp/pulsar-offload"
    tenant_prefix: str = "tenant"
    """Tenants after `public` are `<prefix>-1`, `<prefix>-2`...: two clusters sharing one
    BookKeeper get tenants of their own beside a common `public`."""
    replicated_to: tuple[str, ...] = ()
    """Other clusters the `public` tenant's namespaces replicate to (`replication_clusters`
    of their policies, with this cluster); other tenants' namespaces stay local."""
    first_ledger_id: int = 0
    """The first short ledger id: a second cluster on a BookKeeper that already handed out
    ids gets the next ones (one id generator per ledgers root)."""

    def __post_init__(self) -> None:
        for name in ("tenants", "namespaces_per_tenant", "topics_per_namespace", "bookies"):
            if getattr(self, name) < 1:
                raise InvalidArgument(name, "must be at least 1")
        for name in ("partitions", "ledgers_per_topic", "cursors_per_topic", "schema_versions"):
            low, high = getattr(self, name)
            if not 0 <= low <= high:
                raise InvalidArgument(name, f"range {low}..{high} is not 0 <= low <= high")
        for name in (
            "partitioned_share",
            "offloaded_share",
            "bookkeeper_deleted_share",
            "schema_share",
            "new_topic_share",
            "long_id_share",
            "v2_share",
            "second_location_share",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InvalidArgument(name, "must be a share between 0 and 1")
        self._check_ranges()

    def _check_ranges(self) -> None:
        if self.partitions[0] < 1:
            raise InvalidArgument("partitions", "a partitioned topic has at least 1 partition")
        if self.ledgers_per_topic[0] < 1:
            raise InvalidArgument("ledgers_per_topic", "a topic that is not new has a ledger")
        if self.schema_versions[0] < 1:
            raise InvalidArgument("schema_versions", "a schema has at least one version")
        if not 1 <= self.ensemble_size <= self.bookies:
            raise InvalidArgument("ensemble_size", f"must be between 1 and bookies={self.bookies}")
        if not self.cluster_name:
            raise InvalidArgument("cluster_name", "must not be empty")
        if not self.ledgers_root.startswith("/") or self.ledgers_root.endswith("/"):
            raise InvalidArgument("ledgers_root", "must be an absolute znode path")
        if self.offload_driver is OffloadDriver.FILESYSTEM and (
            self.orphans.unreferenced_offload or self.orphans.other_cluster_objects
        ):
            raise InvalidArgument(
                "orphans", "object orphans need the S3 driver (filesystem offloads write none)"
            )
        if self.layout is LedgerLayout.LEGACY_HIERARCHICAL:
            raise InvalidArgument("layout", "the legacy 2-4-4 layout is not simulated")
        if (self.legacy.offload_2_1 or self.legacy.objects_pre_2_10) and (
            self.offload_driver is not OffloadDriver.S3
        ):
            raise InvalidArgument("legacy", "legacy offloads are blob-store (S3) offloads")
        if self.second_location_share and (
            not self.second_bucket
            or self.second_bucket == self.bucket
            or self.offload_driver is not OffloadDriver.S3
        ):
            raise InvalidArgument(
                "second_bucket", "a second S3 location needs its own bucket and the S3 driver"
            )
        if self.compression_threshold < 0:
            raise InvalidArgument("compression_threshold", "must be >= 0")
        if self.first_ledger_id < 0 or (
            self.first_ledger_id and self.id_layout is not IdLayout.SHORT
        ):
            raise InvalidArgument("first_ledger_id", "a start >= 0, with short ids only")


PROFILES = ("default", "legacy")


def legacy_spec(**overrides: object) -> ClusterSpec:
    """The `legacy` profile: every artifact of the table "What real Pulsar leaves behind".

    One of each orphan and look-alike (OPEN stale cursor ledgers, a broker-style trim whose
    deletes failed, `bookkeeperDeleted` with the BookKeeper copy left, a shadow topic), one of
    each legacy artifact (an unsubscribed cursor's OPEN ledger, a pre-2.2 ledger, a 2.1 offload,
    pre-2.10 objects), LZ4-compressed ML and cursor znodes (the 5.0 default), and a
    long-hierarchical LAYOUT whose older ledgers BookKeeper's manager wrote at long paths while
    the newer ones were written by Pulsar >= 2.10 at hybrid paths.
    """
    base: dict[str, object] = {
        "orphans": OrphanPlan.some(1),
        "legacy": LegacyPlan.some(1),
        "compression": Compression.LZ4,
        "layout": LedgerLayout.LONG_HIERARCHICAL,
        "path_writer": PathWriter.MIXED,
    }
    return ClusterSpec(**{**base, **overrides})  # type: ignore[arg-type]
