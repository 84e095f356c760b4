"""The deleter's configuration: `TOMBSTONE_*` variables, read only by `DeleterConfig.from_env`."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path

from services.core._env import (
    Setting,
    parse_bool,
    parse_choice,
    parse_duration,
    parse_int,
    parse_optional_str,
    parse_str,
)
from services.core.adaptive import LimitSettings
from services.core.config import (
    ADMIN_URL,
    DELETER_MODE,
    DLQ_SUBSCRIPTION,
    PREVIEW_SUBSCRIPTION,
    SUBSCRIPTION,
    ClientConfig,
    Environ,
    GrpcServerConfig,
    LogConfig,
    MetricsConfig,
    PulsarConfig,
    S3Config,
    ZooKeeperConfig,
    client_settings,
    setting,
)
from services.core.errors import ConfigError
from services.deleter.forged import ForgedPace
from services.deleter.outage import GateSettings
from services.systopic.retry import RetryPolicy

DEFAULT_PORT = 50053
DEFAULT_METRICS_PORT = 9103
"""Where `/metrics` listens unless `TOMBSTONE_METRICS_PORT` says otherwise (0: off)."""
DEFAULT_VERIFIER = "127.0.0.1:50052"  # the verifier's own default port

DELETER_ID = setting("DELETER_ID", parse_str, "", "Instance name (default deleter-<hostname>).")
RECEIVER_QUEUE = setting(
    "DELETER_RECEIVER_QUEUE_SIZE", parse_int(1, 100_000), 1000, "Messages prefetched per topic."
)
MAX_IN_FLIGHT = setting(
    "DELETER_MAX_IN_FLIGHT", parse_int(1, 1_000_000), 2000, "Unsettled messages per topic."
)
RETRY_MAX_IN_FLIGHT = setting(
    "DELETER_RETRY_MAX_IN_FLIGHT",
    parse_int(1, 1_000_000),
    10_000,
    "Unsettled messages of the retry topic (most wait out their backoff; about 3 KB each).",
)
MAX_HOLD = setting(
    "DELETER_MAX_HOLD",
    parse_duration,
    timedelta(minutes=10),
    "Longest wait for a PDLI's not-before time (a later time counts as this far).",
)
RETRY_INITIAL = setting(
    "DELETER_RETRY_INITIAL_DELAY", parse_duration, timedelta(seconds=1), "First retry delay."
)
RETRY_MAX_DELAY = setting(
    "DELETER_RETRY_MAX_DELAY", parse_duration, timedelta(minutes=5), "Longest retry delay."
)
RETRY_MAX = setting(
    "DELETER_MAX_RETRIES", parse_int(0, 1000), 10, "Retries before the dead-letter topic."
)
REDELIVERY_MAX = setting(
    "DELETER_MAX_REDELIVERIES",
    parse_int(1, 1000),
    5,
    "Backstop: deliveries of a message that crashes the handler before the client DLQs it.",
)
NACK_DELAY = setting(
    "DELETER_RELEASE_DELAY", parse_duration, timedelta(seconds=60), "Redelivery delay of a release."
)
VERIFY_BATCH = setting(
    "DELETER_VERIFY_BATCH", parse_int(1, 10_000), 256, "Most PDLIs in one VerifyBatch call."
)
VERIFY_CONCURRENCY = setting(
    "DELETER_VERIFY_CONCURRENCY", parse_int(1, 256), 4, "VerifyBatch calls at once."
)
BK_BACKEND = setting(
    "DELETER_BOOKKEEPER_BACKEND",
    parse_choice("zookeeper", "bookie-http", "none"),
    "zookeeper",
    "How BookKeeper ledgers are deleted: the metadata znode, or a bookie's HTTP admin API.",
)
BOOKIE_URL = setting(
    "DELETER_BOOKIE_HTTP_URL", parse_str, "http://127.0.0.1:8000", "Bookie HTTP admin API."
)
LEDGERS_ROOT = setting("DELETER_LEDGERS_ROOT", parse_str, "/ledgers", "BookKeeper ledgers root.")
ZK_RATE = setting(
    "DELETER_ZOOKEEPER_OPS_PER_SECOND",
    parse_int(1),
    2000,
    "ZooKeeper deletes per second (each delete of a multi counts, parent removals too).",
)
ZK_CONCURRENCY = setting(
    "DELETER_ZOOKEEPER_CONCURRENCY",
    parse_int(1, 100_000),
    1024,
    "Ceiling of the adaptive limit of ZooKeeper operations in flight (each delete of a multi "
    "counts).",
)
ZK_CONCURRENCY_MIN = setting(
    "DELETER_ZOOKEEPER_CONCURRENCY_MIN",
    parse_int(1, 10_000),
    1,
    "Floor of the adaptive ZooKeeper limit (equal to the ceiling: a static limit).",
)
ZK_DELETE_BATCH = setting(
    "DELETER_ZOOKEEPER_DELETE_BATCH",
    parse_int(1, 10_000),
    256,
    "Most concurrent ledger deletes coalesced into one batch (ZooKeeper multis of up to 256).",
)
S3_RATE = setting("DELETER_S3_REQUESTS_PER_SECOND", parse_int(1), 200, "S3 requests per second.")
S3_CONCURRENCY = setting(
    "DELETER_S3_CONCURRENCY",
    parse_int(1, 1000),
    8,
    "Ceiling of the adaptive limit of S3 requests at once.",
)
S3_CONCURRENCY_MIN = setting(
    "DELETER_S3_CONCURRENCY_MIN",
    parse_int(1, 1000),
    1,
    "Floor of the adaptive S3 limit (equal to the ceiling: a static limit).",
)
S3_BATCH = setting(
    "DELETER_S3_BATCH_KEYS", parse_int(1, 1000), 1000, "Most keys in one DeleteObjects."
)
S3_CONFIRM_BY_LISTING = setting(
    "DELETER_S3_CONFIRM_BY_LISTING",
    parse_bool,
    False,
    "After each offload delete, also list the ledger's keys and require them absent (one "
    "request per ledger; DeleteObjects' per-key results are the proof without it).",
)
FS_ROOT = setting(
    "DELETER_FILESYSTEM_ROOT",
    parse_optional_str,
    None,
    "Base directory of the filesystem offloader; unset disables that backend.",
)
DRAIN_TIMEOUT = setting(
    "DELETER_DRAIN_TIMEOUT",
    parse_duration,
    timedelta(seconds=8),
    "On SIGTERM, how long started deletes may finish (keep below the gRPC grace period).",
)
STATUS_INTERVAL = setting(
    "DELETER_STATUS_INTERVAL",
    parse_duration,
    timedelta(seconds=30),
    "How often the backlog and dead-letter gauges are refreshed (three admin calls; a DLQ "
    "scan only when its depth changed).",
)
DLQ_SCAN_MAX = setting(
    "DELETER_DLQ_SCAN_MAX", parse_int(1, 1_000_000), 10_000, "Most dead letters one scan reads."
)


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a positive number")
    return value


FORGED_RATE = setting(
    "DELETER_FORGED_DLQ_RATE",
    _positive_float,
    1.0,
    "Forged PDLIs dead-lettered per second and source; the excess waits, held in the window.",
    format="number > 0 (per second)",
)
FORGED_BURST = setting(
    "DELETER_FORGED_DLQ_BURST",
    parse_int(1, 1_000_000),
    100,
    "Forged PDLIs a source may dead-letter at once before the rate applies.",
)
PROBE_INTERVAL = setting(
    "DELETER_OUTAGE_PROBE_INTERVAL",
    parse_duration,
    timedelta(seconds=2),
    "While paused on an outage, time between two probes of the dependency.",
)
OUTAGE_MAX_WAITS = setting(
    "DELETER_OUTAGE_MAX_WAITS",
    parse_int(1, 10_000),
    10,
    "Outage waits of one message before an outage verdict counts as an ordinary retry.",
)
_VERIFIER = client_settings("VERIFIER", DEFAULT_VERIFIER)
# What `tombstone deleter status|dlq` use to reach this service; declared here so that
# describe_env() lists them wherever the service's settings are documented or checked.
DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_PORT}"
_ADMIN_CLIENT = client_settings("DELETER", DEFAULT_ADDRESS)


ZK_INITIAL = 256
"""Where the ZooKeeper limit starts: one full multi in flight."""


@dataclass(frozen=True)
class Limits:
    """Concurrency and rate of one backend."""

    concurrency: int
    """Ceiling of the adaptive concurrency limit."""
    per_second: int
    min_concurrency: int = 1
    """Floor of the adaptive concurrency limit."""
    initial: int | None = None
    """Where the limit starts (within floor and ceiling); None: the limiter's default."""

    def adaptive(self) -> LimitSettings:
        return LimitSettings(
            min_limit=self.min_concurrency, max_limit=self.concurrency, initial_limit=self.initial
        )


@dataclass(frozen=True)
class DeleterConfig:
    grpc: GrpcServerConfig = field(default_factory=lambda: GrpcServerConfig(port=DEFAULT_PORT))
    zookeeper: ZooKeeperConfig = field(default_factory=ZooKeeperConfig)
    pulsar: PulsarConfig = field(default_factory=PulsarConfig)
    s3: S3Config = field(default_factory=S3Config)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log: LogConfig = field(default_factory=LogConfig)
    verifier: ClientConfig = field(default_factory=lambda: ClientConfig(DEFAULT_VERIFIER))
    deleter_id: str = "deleter"
    """Instance name (consumer and producer names)."""
    subscription: str = "tombstone-deleter"
    """The pool's Shared subscription on the system and retry topics."""
    receiver_queue_size: int = 1000
    """Prefetch per topic: with `max_in_flight`, bounds memory under any backlog."""
    max_in_flight: int = 2000
    """Messages per topic received and not settled (waiting, verifying or deleting)."""
    retry_max_in_flight: int = 10_000
    """The same for the retry topic, whose messages mostly wait out their backoff."""
    max_hold: timedelta = timedelta(minutes=10)
    """Longest wait for a not-before time."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    """Backoff and budget of the retry topic."""
    max_redeliveries: int = 5
    """The client's dead-letter backstop for messages that crash the handler."""
    release_delay: timedelta = timedelta(seconds=60)
    """Redelivery delay of a released message."""
    verify_batch: int = 256
    verify_concurrency: int = 4
    bookkeeper_backend: str = "zookeeper"
    """`zookeeper`, `bookie-http` or `none`."""
    bookie_http_url: str = "http://127.0.0.1:8000"
    ledgers_root: str = "/ledgers"
    zookeeper_limits: Limits = Limits(1024, 2000, initial=ZK_INITIAL)
    """ZooKeeper operations in flight (adaptive, each delete of a multi counts) and per second."""
    zookeeper_delete_batch: int = 256
    """Most ledger deletes coalesced into one `delete_many` (ZooKeeper multi) call."""
    s3_limits: Limits = Limits(8, 200)
    """S3 requests at once (adaptive) and per second."""
    s3_batch_keys: int = 1000
    s3_confirm_by_listing: bool = False
    """A listing per ledger after its delete, besides DeleteObjects' per-key results."""
    filesystem_root: Path | None = None
    """Base directory of filesystem offloads; None disables that backend."""
    drain_timeout: timedelta = timedelta(seconds=8)
    admin_url: str = "http://127.0.0.1:8080"
    """Pulsar admin HTTP API, for backlogs."""
    dlq_subscription: str = "tombstone-dlq"
    """Subscription on the dead-letter topic that keeps dead letters until replayed."""
    dlq_scan_max: int = 10_000
    status_interval: timedelta = timedelta(seconds=30)
    """Refresh period of the backlog and dead-letter gauges."""
    forged_pace: ForgedPace = field(default_factory=ForgedPace)
    """Token bucket per source for dead-lettering forged PDLIs."""
    outage: GateSettings = field(default_factory=GateSettings)
    """Probing and bounds of the pause on an outage of the verifier, ZooKeeper or S3."""
    mode: str = "delete"
    """`delete`, or `preview`: verify and report, delete nothing (services/deleter/preview.py)."""
    preview_subscription: str = "tombstone-preview"
    """The subscription a preview reads instead of `subscription`."""

    @property
    def preview(self) -> bool:
        return self.mode == "preview"

    @property
    def reading_subscription(self) -> str:
        """The subscription this deleter consumes: the preview's own in a preview."""
        return self.preview_subscription if self.preview else self.subscription

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> DeleterConfig:
        retry = RetryPolicy(
            initial_delay=_positive(RETRY_INITIAL.name, RETRY_INITIAL.read(environ)),
            max_delay=_positive(RETRY_MAX_DELAY.name, RETRY_MAX_DELAY.read(environ)),
            max_retries=RETRY_MAX.read(environ),
        )
        fs_root = FS_ROOT.read(environ)
        return cls(
            grpc=GrpcServerConfig.from_env(environ, default_port=DEFAULT_PORT),
            zookeeper=ZooKeeperConfig.from_env(environ),
            pulsar=PulsarConfig.from_env(environ),
            s3=S3Config.from_env(environ),
            metrics=MetricsConfig.from_env(environ, default_port=DEFAULT_METRICS_PORT),
            log=LogConfig.from_env(environ),
            verifier=ClientConfig.from_env(
                environ, target="VERIFIER", default_address=DEFAULT_VERIFIER
            ),
            deleter_id=DELETER_ID.read(environ) or f"deleter-{socket.gethostname()}",
            subscription=SUBSCRIPTION.read(environ),
            receiver_queue_size=RECEIVER_QUEUE.read(environ),
            max_in_flight=MAX_IN_FLIGHT.read(environ),
            retry_max_in_flight=RETRY_MAX_IN_FLIGHT.read(environ),
            max_hold=MAX_HOLD.read(environ),
            retry=retry,
            max_redeliveries=REDELIVERY_MAX.read(environ),
            release_delay=NACK_DELAY.read(environ),
            verify_batch=VERIFY_BATCH.read(environ),
            verify_concurrency=VERIFY_CONCURRENCY.read(environ),
            bookkeeper_backend=BK_BACKEND.read(environ),
            bookie_http_url=BOOKIE_URL.read(environ),
            ledgers_root=LEDGERS_ROOT.read(environ),
            zookeeper_limits=replace(
                _limits(environ, ZK_CONCURRENCY, ZK_CONCURRENCY_MIN, ZK_RATE), initial=ZK_INITIAL
            ),
            zookeeper_delete_batch=ZK_DELETE_BATCH.read(environ),
            s3_limits=_limits(environ, S3_CONCURRENCY, S3_CONCURRENCY_MIN, S3_RATE),
            s3_batch_keys=S3_BATCH.read(environ),
            s3_confirm_by_listing=S3_CONFIRM_BY_LISTING.read(environ),
            filesystem_root=Path(fs_root) if fs_root else None,
            drain_timeout=DRAIN_TIMEOUT.read(environ),
            admin_url=ADMIN_URL.read(environ),
            dlq_subscription=DLQ_SUBSCRIPTION.read(environ),
            dlq_scan_max=DLQ_SCAN_MAX.read(environ),
            status_interval=_positive(STATUS_INTERVAL.name, STATUS_INTERVAL.read(environ)),
            forged_pace=ForgedPace(
                rate=FORGED_RATE.read(environ), burst=FORGED_BURST.read(environ)
            ),
            outage=GateSettings(
                probe_interval=_positive(PROBE_INTERVAL.name, PROBE_INTERVAL.read(environ)),
                max_waits=OUTAGE_MAX_WAITS.read(environ),
            ),
            mode=DELETER_MODE.read(environ),
            preview_subscription=_preview_subscription(environ),
        )


def _limits(
    environ: Environ, ceiling: Setting[int], floor: Setting[int], rate: Setting[int]
) -> Limits:
    limits = Limits(ceiling.read(environ), rate.read(environ), floor.read(environ))
    if limits.min_concurrency > limits.concurrency:
        raise ConfigError(floor.name, f"must not exceed {ceiling.name} ({limits.concurrency})")
    return limits


def _preview_subscription(environ: Environ) -> str:
    """A name of its own: sharing the deleters' (or the dead letters') subscription would let
    a preview acknowledge, and so take away, what the deleters must still process."""
    name = PREVIEW_SUBSCRIPTION.read(environ)
    taken = {SUBSCRIPTION.read(environ), DLQ_SUBSCRIPTION.read(environ)}
    if not name or name in taken:
        raise ConfigError(
            PREVIEW_SUBSCRIPTION.name,
            f"must be set and differ from {SUBSCRIPTION.name} and {DLQ_SUBSCRIPTION.name}",
        )
    return name


def _positive(name: str, value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ConfigError(name, "must be positive")
    return value
