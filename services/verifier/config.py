"""The verifier's configuration, read from `TOMBSTONE_*` variables in one place.

Besides the shared settings (`TOMBSTONE_GRPC_*`, `TOMBSTONE_METRICS_*`, `TOMBSTONE_LOG_*`,
`TOMBSTONE_ZOOKEEPER_*`, `TOMBSTONE_S3_*` with `TOMBSTONE_S3_ALLOWED_BUCKETS`,
`TOMBSTONE_OFFLOAD_DEFAULT_*`), it reads the
`TOMBSTONE_VERIFIER_*` settings declared below.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from services.core._env import (
    Setting,
    parse_bool,
    parse_duration,
    parse_int,
    parse_list,
    parse_optional_str,
    parse_str,
    setting,
)
from services.core.adaptive import LimitSettings
from services.core.config import (
    CONFIGURATION_STORE,
    SHARED_CLUSTERS,
    GrpcServerConfig,
    LogConfig,
    MetricsConfig,
    OffloadDefaults,
    S3Config,
    ZooKeeperConfig,
)
from services.core.errors import ConfigError, InvalidArgument
from services.core.shared_clusters import ZOOKEEPER, SharedCluster, StoreUrl
from services.core.signing import TrustedKeys
from services.core.signing_keys import parse_trusted_keys
from services.metadata.pulsar_names import check_named_entity
from services.verifier.believed import BelievedConfig
from services.verifier.offload import OffloadPolicy

DEFAULT_PORT = 50052
DEFAULT_METRICS_PORT = 9102
"""Where `/metrics` listens unless `TOMBSTONE_METRICS_PORT` says otherwise (0: off)."""
"""The verifier's gRPC port unless `TOMBSTONE_GRPC_PORT` says otherwise."""

LEDGERS_ROOT = setting("VERIFIER_LEDGERS_ROOT", parse_str, "/ledgers", "BookKeeper ledgers root.")
BELIEVED_PATH = setting(
    "VERIFIER_BELIEVED_PATH", parse_str, "/tombstone/believed", "Znode of the believed set."
)
BELIEVED_MAX = setting(
    "VERIFIER_BELIEVED_MAX_ENTRIES", parse_int(1), 500_000, "Bound on believed entries."
)
BELIEVED_AGE = setting(
    "VERIFIER_BELIEVED_MAX_AGE", parse_duration, timedelta(hours=24), "Bound on believed age."
)
MIN_AGE = setting(
    "VERIFIER_RECONCILER_MIN_AGE",
    parse_duration,
    timedelta(days=3),
    "Age a ledger or object needs before a RECONCILER PDLI may delete it.",
)
OPEN_AGE = setting(
    "VERIFIER_OPEN_LEDGER_AGE",
    parse_duration,
    timedelta(days=3),
    "Age from which an OPEN ledger nothing shows unlinked is no longer taken as in creation.",
)
FS_BASE = setting(
    "VERIFIER_FILESYSTEM_BASE",
    parse_optional_str,
    None,
    "The filesystem offloader's current fs.defaultFS (else each ledger's storageBasePath).",
)
FS_ALLOWED: Setting[tuple[str, ...]] = setting(
    "VERIFIER_ALLOWED_FILESYSTEM_BASES",
    parse_list,
    (),
    "Filesystem-offloader base paths in which deletions may be approved.",
)
CLUSTER = setting(
    "VERIFIER_CLUSTER_NAME",
    parse_optional_str,
    None,
    "This Pulsar cluster's name: PDLIs naming another cluster are never acted on (any tier), "
    "and offloaded objects naming another cluster are MISMATCH.",
)
DELETED_NAMESPACES: Setting[tuple[str, ...]] = setting(
    "VERIFIER_DELETED_NAMESPACES",
    parse_list,
    (),
    "Namespaces (tenant/ns) the operator names as deleted from this cluster: an owner absent "
    "from one counts as absent although the namespace has no policies here any more.",
)
UNSHARED_CLUSTERS: Setting[tuple[str, ...]] = setting(
    "VERIFIER_UNSHARED_CLUSTERS",
    parse_list,
    (),
    "Clusters that namespaces replicate to and that have a BookKeeper of their own: intents "
    "in those namespaces need no proof that the ledger is ours.",
)
SCHEMA_MIN_AGE = setting(
    "VERIFIER_SCHEMA_MIN_AGE",
    parse_duration,
    timedelta(minutes=2),
    "Age a schema ledger needs before it may be deleted (Pulsar closes it before its locator "
    "names it).",
)
PROPERTY_LEDGER_MIN_AGE = setting(
    "VERIFIER_PROPERTY_LEDGER_MIN_AGE",
    parse_duration,
    timedelta(minutes=10),
    "Time since its last metadata write (its close) a compacted-topic ledger or delayed-delivery "
    "bucket snapshot needs before it may be deleted (Pulsar closes it before the cursor "
    "property names it).",
)
SHADOW_MIN_GAP = setting(
    "VERIFIER_SHADOW_SCAN_MIN_GAP",
    parse_duration,
    timedelta(seconds=5),
    "Shortest time between the starts of two shadow scans asked for by new intents.",
)
SHADOW_ALLOWANCE = setting(
    "VERIFIER_SHADOW_CLOCK_ALLOWANCE",
    parse_duration,
    timedelta(seconds=2),
    "Clock difference allowed between marker, ZooKeeper and verifier when judging whether a "
    "shadow scan started after a ledger left its owner's list.",
)
INCARNATION_ALLOWANCE = setting(
    "VERIFIER_INCARNATION_CLOCK_ALLOWANCE",
    parse_duration,
    timedelta(0),
    "How far the metadata store's (or a BookKeeper client's) clock may run behind the marker's "
    "when judging whether a ledger was created after the intent naming it (ledger ids are "
    "given again after a migration to Oxia).",
)
CACHE_SIZE = setting(
    "VERIFIER_OWNER_CACHE_SIZE", parse_int(1), 100_000, "Owner znodes held in the cache."
)
REMOVED_ALLOW_NO_META = "TOMBSTONE_VERIFIER_ALLOW_WITHOUT_PULSAR_METADATA"
"""Removed: a ledger without Pulsar metadata needs a signed intent whose owner unlinked it (a
blanket opt-in would let any PDLI, a reconciler's included, delete DistributedLog ledgers)."""

MAX_BATCH = setting(
    "VERIFIER_MAX_BATCH", parse_int(1, 100_000), 1_000, "Most PDLIs in one VerifyBatch call."
)
MAX_BELIEVE = setting(
    "VERIFIER_MAX_BELIEVE", parse_int(1, 1_000_000), 100_000, "Most PDLIs in one Believe call."
)
SHADOW_SCAN = setting(
    "VERIFIER_SHADOW_SCAN_INTERVAL",
    parse_duration,
    timedelta(minutes=5),
    "How often the shadow-topic index is rebuilt; 0 turns shadow checks off.",
)
TRUSTED_KEYS: Setting[TrustedKeys] = setting(
    "VERIFIER_TRUSTED_KEYS",
    parse_trusted_keys,
    TrustedKeys(),
    "Marker public keys whose PDLI signatures are trusted: comma-separated [id=]path (PEM or "
    "base64) or [id=]base64:<key>; the id defaults to the key's fingerprint.",
    format="key list",
)
REQUIRE_SIGNED = setting(
    "VERIFIER_REQUIRE_SIGNED",
    parse_bool,
    False,
    "Unsigned PDLIs and PDLIs signed by an untrusted key get SKIP FORGED (dead-lettered).",
)

ZK_CONCURRENCY = setting(
    "VERIFIER_ZOOKEEPER_CONCURRENCY",
    parse_int(1, 100_000),
    256,
    "Ceiling of the adaptive limit of ZooKeeper reads at once.",
)
ZK_CONCURRENCY_MIN = setting(
    "VERIFIER_ZOOKEEPER_CONCURRENCY_MIN",
    parse_int(1, 100_000),
    1,
    "Floor of the adaptive ZooKeeper read limit (equal to the ceiling: a static limit).",
)
S3_CONCURRENCY = setting(
    "VERIFIER_S3_CONCURRENCY",
    parse_int(1, 10_000),
    64,
    "Ceiling of the adaptive limit of S3 reads (HEAD, ranged GET) at once.",
)
S3_CONCURRENCY_MIN = setting(
    "VERIFIER_S3_CONCURRENCY_MIN",
    parse_int(1, 10_000),
    1,
    "Floor of the adaptive S3 read limit (equal to the ceiling: a static limit).",
)


def _concurrency(
    environ: Mapping[str, str], ceiling: Setting[int], floor: Setting[int]
) -> LimitSettings:
    low, high = floor.read(environ), ceiling.read(environ)
    if low > high:
        raise ConfigError(floor.name, f"must not exceed {ceiling.name} ({high})")
    return LimitSettings(min_limit=low, max_limit=high)


@dataclass(frozen=True)
class VerifierConfig:
    grpc: GrpcServerConfig = field(default_factory=lambda: GrpcServerConfig(port=DEFAULT_PORT))
    """Where and how the service listens."""
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log: LogConfig = field(default_factory=LogConfig)
    zookeeper: ZooKeeperConfig = field(default_factory=ZooKeeperConfig)
    s3: S3Config = field(default_factory=S3Config)
    """Endpoint and credentials for HEADs; `allowed_buckets` is the offload allow-list."""
    ledgers_root: str = "/ledgers"
    """BookKeeper's ledgers root; its `LAYOUT` is read at start and followed."""
    believed: BelievedConfig = field(default_factory=BelievedConfig)
    reconciler_min_age: timedelta = timedelta(days=3)
    """RECONCILER PDLIs: minimum age of the ledger (znode ctime) or object at verification."""
    open_ledger_age: timedelta = timedelta(days=3)
    """The OPEN rule's age window (ledger ctime, else znode ctime), as the reconciler's."""
    offload: OffloadPolicy = field(default_factory=OffloadPolicy)
    owner_cache_size: int = 100_000
    """Owner znodes (ML lists, cursors, schema locators) cached with watches."""
    max_batch: int = 1_000
    """Most PDLIs in one VerifyBatch call."""
    max_believe: int = 100_000
    """Most PDLIs in one Believe call."""
    shadow_scan_interval: timedelta = timedelta(minutes=5)
    """Rebuild period of the shadow-topic index; zero turns shadow checks off."""
    trusted_keys: TrustedKeys = field(default_factory=TrustedKeys)
    """Public keys of the markers (docs/design.md §4.7); the verifier holds no private key."""
    require_signed: bool = False
    """Unsigned or untrusted-key PDLIs are SKIP FORGED. A bad signature always is."""
    zookeeper_concurrency: LimitSettings = field(
        default_factory=lambda: LimitSettings(max_limit=256)
    )
    """Floor and ceiling of the adaptive limit of ZooKeeper reads at once."""
    s3_concurrency: LimitSettings = field(default_factory=lambda: LimitSettings(max_limit=64))
    """Floor and ceiling of the adaptive limit of S3 reads at once."""
    shared_clusters: tuple[SharedCluster, ...] = ()
    """Other clusters sharing the ledgers root (`services.verifier.clusters`)."""
    configuration_store: StoreUrl | None = None
    """Where namespace policies are read; None: the metadata store."""
    deleted_namespaces: frozenset[str] = frozenset()
    """Namespaces named as deleted here: an absent owner in one counts as absent."""
    unshared_clusters: frozenset[str] = frozenset()
    """Replication clusters with a BookKeeper of their own."""
    schema_min_age: timedelta = timedelta(minutes=2)
    """A younger schema ledger is RETRY (it may be between its close and its locator)."""
    property_ledger_min_age: timedelta = timedelta(minutes=10)
    """A compacted ledger or bucket snapshot written more recently is RETRY (it may be
    between its close and the cursor property that names it)."""
    shadow_scan_min_gap: timedelta = timedelta(seconds=5)
    """Shortest gap between the starts of shadow scans asked for by new intents."""
    shadow_clock_allowance: timedelta = timedelta(seconds=2)
    """Clock allowance when asking for a shadow scan newer than an unlink."""
    incarnation_clock_allowance: timedelta = timedelta(0)
    """Clock allowance when judging whether a ledger is newer than the intent naming it."""

    @property
    def cluster_name(self) -> str | None:
        return self.offload.cluster_name

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> VerifierConfig:
        if REMOVED_ALLOW_NO_META in environ:
            raise ConfigError(
                REMOVED_ALLOW_NO_META,
                "removed: ledgers without Pulsar metadata are deleted only with a signed intent",
            )
        s3 = S3Config.from_env(environ)
        defaults = OffloadDefaults.from_env(environ)
        believed = BelievedConfig(
            root=BELIEVED_PATH.read(environ),
            max_entries=BELIEVED_MAX.read(environ),
            max_age=BELIEVED_AGE.read(environ),
        )
        if believed.max_batch_entries > believed.max_entries:
            believed = BelievedConfig(
                believed.root, believed.max_entries, believed.max_age, believed.max_entries
            )
        if not believed.root.startswith("/") or believed.root.endswith("/"):
            raise ConfigError(BELIEVED_PATH.name, "must be an absolute znode path")
        trusted, require_signed = TRUSTED_KEYS.read(environ), REQUIRE_SIGNED.read(environ)
        if require_signed and not trusted:
            raise ConfigError(TRUSTED_KEYS.name, f"{REQUIRE_SIGNED.name} is on but no key is given")
        cluster = CLUSTER.read(environ)
        shared = _shared_clusters(environ, cluster, require_signed)
        unshared = frozenset(UNSHARED_CLUSTERS.read(environ))
        both = sorted(unshared & {other.name for other in shared})
        if both:
            raise ConfigError(UNSHARED_CLUSTERS.name, f"{', '.join(both)} also declared as sharing")
        configuration = CONFIGURATION_STORE.read(environ)
        if configuration is not None and configuration.kind != ZOOKEEPER:
            raise ConfigError(CONFIGURATION_STORE.name, "only ZooKeeper stores are read so far")
        return cls(
            grpc=GrpcServerConfig.from_env(environ, default_port=DEFAULT_PORT),
            metrics=MetricsConfig.from_env(environ, default_port=DEFAULT_METRICS_PORT),
            log=LogConfig.from_env(environ),
            zookeeper=ZooKeeperConfig.from_env(environ),
            s3=s3,
            ledgers_root=LEDGERS_ROOT.read(environ),
            believed=believed,
            reconciler_min_age=MIN_AGE.read(environ),
            open_ledger_age=OPEN_AGE.read(environ),
            offload=OffloadPolicy(
                allowed_buckets=s3.allowed_buckets,
                default_bucket=defaults.bucket,
                default_driver=defaults.driver,
                allowed_filesystem_bases=frozenset(FS_ALLOWED.read(environ)),
                filesystem_base=FS_BASE.read(environ),
                cluster_name=cluster,
            ),
            owner_cache_size=CACHE_SIZE.read(environ),
            max_batch=MAX_BATCH.read(environ),
            max_believe=MAX_BELIEVE.read(environ),
            shadow_scan_interval=SHADOW_SCAN.read(environ),
            trusted_keys=trusted,
            require_signed=require_signed,
            zookeeper_concurrency=_concurrency(environ, ZK_CONCURRENCY, ZK_CONCURRENCY_MIN),
            s3_concurrency=_concurrency(environ, S3_CONCURRENCY, S3_CONCURRENCY_MIN),
            shared_clusters=shared,
            configuration_store=configuration,
            deleted_namespaces=_namespaces(environ),
            unshared_clusters=unshared,
            schema_min_age=SCHEMA_MIN_AGE.read(environ),
            property_ledger_min_age=PROPERTY_LEDGER_MIN_AGE.read(environ),
            shadow_scan_min_gap=SHADOW_MIN_GAP.read(environ),
            shadow_clock_allowance=SHADOW_ALLOWANCE.read(environ),
            incarnation_clock_allowance=INCARNATION_ALLOWANCE.read(environ),
        )


def _shared_clusters(
    environ: Mapping[str, str], cluster: str | None, require_signed: bool
) -> tuple[SharedCluster, ...]:
    """The declared neighbours, checked against our own name (which they then need)."""
    shared = SHARED_CLUSTERS.read(environ)
    if (require_signed or shared) and not cluster:
        why = REQUIRE_SIGNED.name if require_signed else SHARED_CLUSTERS.name
        raise ConfigError(CLUSTER.name, f"{why} needs this cluster's name (PDLIs carry one)")
    for other in shared:
        if other.name == cluster:
            raise ConfigError(SHARED_CLUSTERS.name, f"{other.name!r} is this cluster's own name")
        if other.store.kind != ZOOKEEPER:
            raise ConfigError(
                SHARED_CLUSTERS.name, f"{other.name}: only ZooKeeper stores are read so far"
            )
    return shared


def _namespaces(environ: Mapping[str, str]) -> frozenset[str]:
    names = DELETED_NAMESPACES.read(environ)
    for name in names:
        parts = name.split("/")
        try:
            if len(parts) not in (2, 3):
                raise InvalidArgument("namespace", "expected tenant/namespace")
            for part in parts:
                check_named_entity(part, "namespace")
        except InvalidArgument as e:
            raise ConfigError(DELETED_NAMESPACES.name, f"{name!r}: {e}") from e
    return frozenset(names)
