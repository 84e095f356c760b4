"""The marker's configuration: `TOMBSTONE_*` variables, read only by `MarkerConfig.from_env`."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core._env import (
    Setting,
    parse_bool,
    parse_choice,
    parse_duration,
    parse_int,
    parse_optional_str,
    parse_str,
)
from services.core.config import (
    ADMIN_URL,
    SHARED_CLUSTERS,
    SUBSCRIPTION,
    ClientConfig,
    Environ,
    GrpcServerConfig,
    LogConfig,
    MetricsConfig,
    OffloadDefaults,
    PulsarConfig,
    ZooKeeperConfig,
    client_settings,
    setting,
)
from services.core.errors import ConfigError
from services.core.shared_clusters import ZOOKEEPER, SharedCluster
from services.core.signing import IntentSigner, check_key_id
from services.core.signing_keys import build_signer, parse_signing_keys
from services.marker.owners import EncodingOptions
from services.metadata import CompressionType

DEFAULT_PORT = 50051
DEFAULT_METRICS_PORT = 9101
"""Where `/metrics` listens unless `TOMBSTONE_METRICS_PORT` says otherwise (0: off)."""
DEFAULT_VERIFIER = "127.0.0.1:50052"

MARKER_ID = setting(
    "MARKER_ID",
    parse_str,
    "",
    "Stable name of this marker instance, also its producer name (default marker-<hostname>).",
)
CLUSTER = setting("MARKER_CLUSTER", parse_str, "", "Pulsar cluster name written into PDLIs.")
MAX_BATCH = setting(
    "MARKER_MAX_BATCH", parse_int(1, 1_000_000), 10_000, "Most ledger ids in one Mark call."
)
DELIVERY_DELAY = setting(
    "MARKER_DELIVERY_DELAY",
    parse_duration,
    timedelta(seconds=5),
    "PDLIs are not acted on before marked_at + this (not_before_ms in the PDLI).",
)
RETRY_WINDOW = setting(
    "MARKER_RETRY_WINDOW",
    parse_duration,
    timedelta(seconds=60),
    "A write landing this long after the sends re-sends fresh PDLIs; receipts kept this long.",
)
MAX_IN_FLIGHT = setting(
    "MARKER_MAX_IN_FLIGHT", parse_int(1, 1_000_000), 10_000, "PDLIs sent and not yet acknowledged."
)
MAX_ROUND = setting(
    "MARKER_MAX_ROUND",
    parse_int(1, 100_000),
    1000,
    "Most PDLIs sent to one partition as one batch (one round).",
)
SEND_TIMEOUT = setting(
    "MARKER_SEND_TIMEOUT",
    parse_duration,
    timedelta(seconds=30),
    "A PDLI unacknowledged this long fails.",
)
JOURNAL_DIR = setting(
    "MARKER_JOURNAL_DIR",
    parse_optional_str,
    None,
    "Directory of the receipt journal that survives restarts; unset keeps it in memory only.",
)
BELIEVE = setting(
    "MARKER_BELIEVE_ENABLED", parse_bool, True, "Report unlinked ledgers to the verifier."
)
COMPRESSION = setting(
    "MARKER_ML_COMPRESSION",
    parse_choice("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"),
    "NONE",
    "Compression of the ML and cursor znodes the marker writes (the broker's setting).",
)
COMPRESSION_THRESHOLD = setting(
    "MARKER_ML_COMPRESSION_THRESHOLD",
    parse_int(0),
    16384,
    "Compress only znodes larger than this many bytes.",
)
OFFLOAD_TIER = setting(
    "MARKER_OFFLOAD_TIER",
    parse_bool,
    True,
    "Send OFFLOAD_LEDGER intents for offloaded ledgers; off refuses to mark offloaded ledgers.",
)
PAUSE_AFTER_SEND = setting(
    "MARKER_TEST_PAUSE_AFTER_SEND",
    parse_duration,
    timedelta(0),
    "TEST ONLY: sleep between the last receipt and the owner write (crash-point tests).",
)
SIGNING_KEYS: Setting[dict[str, Ed25519PrivateKey]] = setting(
    "MARKER_SIGNING_KEYS",
    parse_signing_keys,
    {},
    "Ed25519 private keys that sign PDLIs: comma-separated [id=]path (PEM or base64 seed) "
    "or [id=]base64:<seed>; the id defaults to the public key's fingerprint.",
    secret=True,
)
SIGNING_KEY_ID = setting(
    "MARKER_SIGNING_KEY_ID",
    check_key_id,
    "",
    "Id of the signing key in use (required when several keys are given).",
)
REQUIRE_SIGNED = setting(
    "MARKER_REQUIRE_SIGNED",
    parse_bool,
    False,
    "Refuse to start without a signing key (PDLIs would go out unsigned).",
)
FOLLOW = setting(
    "MARKER_FOLLOW",
    parse_bool,
    False,
    "Run the follower: watch the owner znodes of unmodified brokers and send OBSERVED PDLIs "
    "for every unlink they make (`tombstone marker serve --follow` sets it too).",
)
FOLLOW_CHECKPOINT_INTERVAL = setting(
    "MARKER_FOLLOW_CHECKPOINT_INTERVAL",
    parse_duration,
    timedelta(seconds=60),
    "How often the active follower writes its index to /tombstone/follower/checkpoint.",
)
SUBSCRIPTION_CHECK_INTERVAL = setting(
    "MARKER_SUBSCRIPTION_CHECK_INTERVAL",
    parse_duration,
    timedelta(seconds=30),
    "How often the marker checks (admin API) that the deleters' subscription exists on every "
    "partition of the system topic; nothing is published while it is missing.",
)
SUBSCRIPTION_UNKNOWN_GRACE = setting(
    "MARKER_SUBSCRIPTION_UNKNOWN_GRACE",
    parse_duration,
    timedelta(minutes=2),
    "While the admin API does not answer, how long the last known answer about the deleters' "
    "subscription stands; after that it counts as missing.",
)
_VERIFIER = client_settings("VERIFIER", DEFAULT_VERIFIER)
# What `tombstone mark` uses to reach this service (declared so describe_env() lists it).
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
_MARK_CLIENT = client_settings("MARKER", DEFAULT_ADDRESS)


@dataclass(frozen=True)
class MarkerConfig:
    grpc: GrpcServerConfig = field(default_factory=lambda: GrpcServerConfig(port=DEFAULT_PORT))
    zookeeper: ZooKeeperConfig = field(default_factory=ZooKeeperConfig)
    pulsar: PulsarConfig = field(default_factory=PulsarConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log: LogConfig = field(default_factory=LogConfig)
    verifier: ClientConfig | None = None
    """Where to send Believe reports; None turns them off."""
    marker_id: str = "marker"
    """Stable instance name; the producer name, so the broker deduplicates across restarts."""
    cluster: str = ""
    """Pulsar cluster name put into PDLIs."""
    max_batch: int = 10_000
    """Most ledger ids in one request; more is INVALID_ARGUMENT."""
    delivery_delay: timedelta = timedelta(seconds=5)
    """PDLIs carry `not_before_ms = marked_at_ms + delivery_delay`."""
    retry_window: timedelta = timedelta(seconds=60)
    """Writes landing later than this after the sends trigger fresh PDLIs."""
    max_in_flight: int = 10_000
    """Bound on PDLIs sent and not yet acknowledged."""
    max_round: int = 1000
    """Most PDLIs sent to one partition as one batch."""
    send_timeout: timedelta = timedelta(seconds=30)
    """Per-PDLI send deadline."""
    journal_dir: Path | None = None
    """Receipt journal directory; None keeps receipts in memory only."""
    encoding: EncodingOptions = field(default_factory=EncodingOptions)
    """How ML and cursor znodes are re-encoded."""
    pause_after_send: timedelta | None = None
    """Test only (TOMBSTONE_MARKER_TEST_PAUSE_AFTER_SEND)."""
    signer: IntentSigner | None = None
    """Signs every PDLI sent (docs/design.md §4.7); None sends them unsigned."""
    offload_tier: bool = True
    """Send OFFLOAD_LEDGER intents; the verifier must then allow the buckets (checked at start)."""
    offload_defaults: OffloadDefaults = field(default_factory=OffloadDefaults)
    """The operator's offloader for contexts without driver metadata (Pulsar 2.1)."""
    follow: bool = False
    """Run the follower (docs/design.md §6b) beside the Marker API."""
    follow_checkpoint_interval: timedelta = timedelta(seconds=60)
    """How often the active follower checkpoints its index."""
    shared_clusters: tuple[SharedCluster, ...] = ()
    """Other clusters sharing the ledgers root: reconciler requests are checked against them."""
    admin_url: str = "http://127.0.0.1:8080"
    """Pulsar's admin API, where the deleters' subscription is checked."""
    deleter_subscription: str = "tombstone-deleter"
    """The subscription that must exist on every partition before anything is published."""
    subscription_check_interval: timedelta = timedelta(seconds=30)
    subscription_unknown_grace: timedelta = timedelta(minutes=2)

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> MarkerConfig:
        return cls(
            grpc=GrpcServerConfig.from_env(environ, default_port=DEFAULT_PORT),
            zookeeper=ZooKeeperConfig.from_env(environ),
            pulsar=PulsarConfig.from_env(environ),
            metrics=MetricsConfig.from_env(environ, default_port=DEFAULT_METRICS_PORT),
            log=LogConfig.from_env(environ),
            verifier=(
                ClientConfig.from_env(environ, target="VERIFIER", default_address=DEFAULT_VERIFIER)
                if BELIEVE.read(environ)
                else None
            ),
            marker_id=MARKER_ID.read(environ) or f"marker-{socket.gethostname()}",
            cluster=CLUSTER.read(environ),
            max_batch=MAX_BATCH.read(environ),
            delivery_delay=DELIVERY_DELAY.read(environ),
            retry_window=_positive(RETRY_WINDOW.name, RETRY_WINDOW.read(environ)),
            max_in_flight=MAX_IN_FLIGHT.read(environ),
            max_round=MAX_ROUND.read(environ),
            send_timeout=_positive(SEND_TIMEOUT.name, SEND_TIMEOUT.read(environ)),
            journal_dir=_path(JOURNAL_DIR.read(environ)),
            encoding=EncodingOptions(
                CompressionType[COMPRESSION.read(environ)], COMPRESSION_THRESHOLD.read(environ)
            ),
            pause_after_send=PAUSE_AFTER_SEND.read(environ) or None,
            signer=_signer(environ),
            offload_tier=OFFLOAD_TIER.read(environ),
            offload_defaults=OffloadDefaults.from_env(environ),
            follow=FOLLOW.read(environ),
            follow_checkpoint_interval=_positive(
                FOLLOW_CHECKPOINT_INTERVAL.name, FOLLOW_CHECKPOINT_INTERVAL.read(environ)
            ),
            shared_clusters=_shared(environ),
            admin_url=ADMIN_URL.read(environ),
            deleter_subscription=SUBSCRIPTION.read(environ),
            subscription_check_interval=_positive(
                SUBSCRIPTION_CHECK_INTERVAL.name, SUBSCRIPTION_CHECK_INTERVAL.read(environ)
            ),
            subscription_unknown_grace=SUBSCRIPTION_UNKNOWN_GRACE.read(environ),
        )


def _signer(environ: Environ) -> IntentSigner | None:
    try:
        signer = build_signer(SIGNING_KEYS.read(environ), SIGNING_KEY_ID.read(environ))
    except ValueError as exc:
        raise ConfigError(SIGNING_KEY_ID.name, str(exc)) from exc
    if signer is None and REQUIRE_SIGNED.read(environ):
        raise ConfigError(SIGNING_KEYS.name, f"{REQUIRE_SIGNED.name} is on but no key is given")
    return signer


def _positive(name: str, value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ConfigError(name, "must be positive")
    return value


def _path(raw: str | None) -> Path | None:
    return Path(raw) if raw else None


def _shared(environ: Environ) -> tuple[SharedCluster, ...]:
    """The declared neighbours; each must be a ZooKeeper store and not this cluster."""
    shared = SHARED_CLUSTERS.read(environ)
    cluster = CLUSTER.read(environ)
    for other in shared:
        if other.name == cluster:
            raise ConfigError(SHARED_CLUSTERS.name, f"{other.name!r} is this cluster's own name")
        if other.store.kind != ZOOKEEPER:
            raise ConfigError(
                SHARED_CLUSTERS.name, f"{other.name}: only ZooKeeper stores are read so far"
            )
    return shared
