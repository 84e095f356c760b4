"""Configuration shared by the services: frozen dataclasses loaded from `TOMBSTONE_*` variables.

This module (through `from_env`) is the only code that reads the environment. A service's own
`config.py` composes these pieces with its own settings, declared with `setting(...)` so that
`describe_env()` lists them too. Durations use the one syntax of `services.core.durations`
(`30` seconds, `500ms`, `90s`, `1h30m`, `3d`), as the CLI options do.
"""

from __future__ import annotations

import ipaddress
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from services.core._client_config import ClientConfig, client_settings
from services.core._env import (
    PREFIX,
    Setting,
    describe_env,
    parse_bool,
    parse_choice,
    parse_duration,
    parse_int,
    parse_list,
    parse_optional_bool,
    parse_optional_str,
    parse_port,
    parse_str,
    setting,
    unknown_variables,
)
from services.core._tokens import Principal, parse_tokens
from services.core.errors import ConfigError, ExposedWithoutAuth
from services.core.metadata_stores import MetadataStores
from services.core.pulsar_security import PulsarSecurity
from services.core.shared_clusters import (
    ZOOKEEPER,
    SharedCluster,
    StoreUrl,
    parse_shared_clusters,
    parse_store_url,
)
from services.core.zk_security import ZooKeeperSecurity

__all__ = [
    "PREFIX",
    "AuthConfig",
    "ClientConfig",
    "GrpcServerConfig",
    "LogConfig",
    "MetadataStores",
    "MetricsConfig",
    "OffloadDefaults",
    "Principal",
    "PulsarConfig",
    "PulsarSecurity",
    "S3Config",
    "TlsServerConfig",
    "ZooKeeperConfig",
    "canonical_endpoint",
    "check_region",
    "client_settings",
    "describe_env",
    "is_loopback",
    "parse_bool",
    "parse_choice",
    "parse_duration",
    "parse_int",
    "parse_list",
    "parse_optional_str",
    "parse_port",
    "parse_str",
    "setting",
    "unknown_variables",
]

Environ = Mapping[str, str]

# --- gRPC server ---------------------------------------------------------------------------

GRPC_HOST = setting("GRPC_HOST", parse_str, "127.0.0.1", "Address the gRPC server binds.")
GRPC_PORT = setting(
    "GRPC_PORT", parse_port, -1, "gRPC port; 0 picks a free one. Default: the service's own."
)
GRPC_GRACE = setting(
    "GRPC_GRACE_PERIOD",
    parse_duration,
    timedelta(seconds=10),
    "How long in-flight RPCs may run after a stop signal.",
)
GRPC_MAX_MESSAGE = setting(
    "GRPC_MAX_MESSAGE_BYTES", parse_int(1024), 4 * 1024 * 1024, "Largest gRPC message, bytes."
)
TLS_CERT = setting(
    "GRPC_TLS_CERT_FILE", parse_optional_str, None, "Server certificate (PEM).", format="path"
)
TLS_KEY = setting(
    "GRPC_TLS_KEY_FILE", parse_optional_str, None, "Server private key (PEM).", format="path"
)
TLS_CA = setting(
    "GRPC_TLS_CLIENT_CA_FILE",
    parse_optional_str,
    None,
    "CA that signs client certificates.",
    format="path",
)
TLS_REQUIRE_CLIENT = setting(
    "GRPC_TLS_REQUIRE_CLIENT_CERT",
    parse_bool,
    False,
    "Reject clients without a certificate signed by the client CA.",
)
AUTH_ENABLED = setting(
    "AUTH_ENABLED",
    parse_optional_bool,
    None,
    "Require tokens. Default: on exactly when a token table is configured. Serving a "
    "non-loopback TOMBSTONE_GRPC_HOST without tokens (or required client certificates) "
    "needs an explicit false.",
)
AUTH_TOKENS: Setting[dict[str, Principal]] = setting(
    "AUTH_TOKENS",
    parse_tokens,
    {},
    "Inline token table: '<token> <role>[,<role>] [<subject>]' entries separated by ';'.",
    secret=True,
    format="token table",
)
AUTH_TOKENS_FILE: Setting[dict[str, Principal]] = setting(
    "AUTH_TOKENS_FILE",
    lambda raw: parse_tokens(Path(raw).read_text(encoding="utf-8")),
    {},
    "Token table file: JSON {token: {subject, roles}} or '<token> <role>[,<role>]' lines.",
    format="path",
)


@dataclass(frozen=True)
class TlsServerConfig:
    """Server-side TLS."""

    cert_file: Path
    """PEM certificate chain presented to clients."""
    key_file: Path
    """PEM private key of `cert_file`."""
    client_ca_file: Path | None = None
    """PEM CA bundle that client certificates must chain to."""
    require_client_cert: bool = False
    """Reject clients that present no valid certificate (mutual TLS)."""


@dataclass(frozen=True)
class AuthConfig:
    """Bearer-token authentication with roles."""

    enabled: bool = False
    """When off, every call is allowed (local development only)."""
    tokens: Mapping[str, Principal] = field(default_factory=dict, repr=False)
    """Token -> who holds it and their roles. Hidden from repr: tokens are secrets."""
    explicit: bool = False
    """`enabled` was set by `TOMBSTONE_AUTH_ENABLED` rather than inferred from the tokens: only
    an explicit off lets a server listen beyond loopback without authentication."""

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> AuthConfig:
        tokens = {**AUTH_TOKENS_FILE.read(environ), **AUTH_TOKENS.read(environ)}
        chosen = AUTH_ENABLED.read(environ)
        enabled = bool(tokens) if chosen is None else chosen
        if enabled and not tokens:
            raise ConfigError(
                AUTH_ENABLED.name,
                f"auth is on but neither {AUTH_TOKENS.name} nor {AUTH_TOKENS_FILE.name} is set",
            )
        return cls(enabled=enabled, tokens=tokens, explicit=chosen is not None)


@dataclass(frozen=True)
class GrpcServerConfig:
    """How a service listens."""

    host: str = "127.0.0.1"
    """Bind address; containers set `0.0.0.0`."""
    port: int = 0
    """Listening port; 0 picks a free one (the bound port is logged in `service_ready`)."""
    grace_period: timedelta = timedelta(seconds=10)
    """How long in-flight RPCs may finish after a stop signal before they are cancelled."""
    max_message_bytes: int = 4 * 1024 * 1024
    """Largest message received or sent."""
    tls: TlsServerConfig | None = None
    """TLS settings; None serves plaintext."""
    auth: AuthConfig = field(default_factory=AuthConfig)
    """Token authentication."""

    def __post_init__(self) -> None:
        # Checked here rather than in from_env so that no server, however its configuration
        # was built, can serve MarkLedgers and the deleter's admin API to anyone who can
        # reach the port.
        if self.exposed and not self.authenticates and not self.auth.explicit:
            raise ExposedWithoutAuth(
                AUTH_ENABLED.name,
                f"the gRPC server would listen on {self.host} ({GRPC_HOST.name}), which is not "
                f"loopback, with no authentication; set {AUTH_TOKENS.name} or "
                f"{AUTH_TOKENS_FILE.name}, bind 127.0.0.1, or set {AUTH_ENABLED.name}=false "
                "explicitly",
            )

    @property
    def exposed(self) -> bool:
        """The bind address is not loopback: other machines may reach the server."""
        return not is_loopback(self.host)

    @property
    def authenticates(self) -> bool:
        """Callers prove who they are: a token, or a client certificate signed by the client
        CA (TLS that requires one). A required certificate authenticates the caller but
        carries no role: every certified caller may call every method."""
        return self.auth.enabled or (self.tls is not None and self.tls.require_client_cert)

    @property
    def unauthenticated_exposure(self) -> bool:
        """Listening beyond loopback with no authentication, by the operator's explicit
        choice (`TOMBSTONE_AUTH_ENABLED=false`): allowed, but warned about and exported as
        `tombstone_auth_disabled_exposed`."""
        return self.exposed and not self.authenticates

    @classmethod
    def from_env(cls, environ: Environ = os.environ, *, default_port: int) -> GrpcServerConfig:
        port = GRPC_PORT.read(environ)
        return cls(
            host=GRPC_HOST.read(environ),
            port=default_port if port < 0 else port,
            grace_period=GRPC_GRACE.read(environ),
            max_message_bytes=GRPC_MAX_MESSAGE.read(environ),
            tls=_tls_from_env(environ),
            auth=AuthConfig.from_env(environ),
        )


_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")


def is_loopback(host: str) -> bool:
    """`host` is 127.0.0.0/8, ::1 (bracketed or not) or `localhost`. Nothing is resolved: any
    other name, a wildcard (0.0.0.0, ::) or something unparsable counts as reachable from
    other machines, since a name may resolve differently tomorrow."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return address in _LOOPBACK_V4
    return address == _LOOPBACK_V6


def _tls_from_env(environ: Environ) -> TlsServerConfig | None:
    cert, key, ca = TLS_CERT.read(environ), TLS_KEY.read(environ), TLS_CA.read(environ)
    require = TLS_REQUIRE_CLIENT.read(environ)
    if cert is None and key is None:
        if ca is not None or require:
            raise ConfigError(TLS_CERT.name, "client certificates need server TLS")
        return None
    if cert is None or key is None:
        missing = TLS_CERT.name if cert is None else TLS_KEY.name
        raise ConfigError(missing, "TLS needs both a certificate and a key")
    if require and ca is None:
        raise ConfigError(TLS_CA.name, "required client certificates need a client CA")
    for variable, path in ((TLS_CERT, cert), (TLS_KEY, key), (TLS_CA, ca)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(variable.name, f"no such file: {path}")
    return TlsServerConfig(Path(cert), Path(key), Path(ca) if ca else None, require)


# --- metrics and logs ----------------------------------------------------------------------

METRICS_HOST = setting("METRICS_HOST", parse_str, "127.0.0.1", "Address of /metrics.")
METRICS_PORT = setting(
    "METRICS_PORT",
    parse_port,
    -1,
    "Port of /metrics; 0 turns it off. Default: the service's own (marker 9101, verifier 9102, "
    "deleter 9103).",
)
LOG_LEVEL = setting(
    "LOG_LEVEL",
    parse_choice("debug", "info", "warning", "error", "critical"),
    "info",
    "Lowest log level written.",
)
LOG_FORMAT = setting(
    "LOG_FORMAT",
    parse_choice("auto", "json", "console"),
    "auto",
    "Log rendering; auto is JSON unless stdout is a terminal.",
)


@dataclass(frozen=True)
class MetricsConfig:
    """The Prometheus `/metrics` endpoint."""

    host: str = "127.0.0.1"
    """Bind address of the HTTP endpoint."""
    port: int = 0
    """HTTP port; 0 turns the endpoint off. Built in code the endpoint is off; read from the
    environment it is on, at the service's own port unless `TOMBSTONE_METRICS_PORT` says."""

    @classmethod
    def from_env(cls, environ: Environ = os.environ, *, default_port: int) -> MetricsConfig:
        port = METRICS_PORT.read(environ)
        return cls(host=METRICS_HOST.read(environ), port=default_port if port < 0 else port)


@dataclass(frozen=True)
class LogConfig:
    """structlog output."""

    level: str = "info"
    """Lowest level written: debug, info, warning, error or critical."""
    format: str = "auto"
    """`json`, `console`, or `auto` (JSON unless stdout is a terminal)."""

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> LogConfig:
        return cls(level=LOG_LEVEL.read(environ), format=LOG_FORMAT.read(environ))


# --- ZooKeeper, Pulsar, S3 -----------------------------------------------------------------

ZK_SERVERS = setting(
    "ZOOKEEPER_SERVERS", parse_str, "127.0.0.1:2181", "ZooKeeper connect string host:port,..."
)
ZK_CHROOT = setting("ZOOKEEPER_CHROOT", parse_str, "", "ZooKeeper chroot path, e.g. /pulsar.")
ZK_SESSION = setting(
    "ZOOKEEPER_SESSION_TIMEOUT",
    parse_duration,
    timedelta(seconds=30),
    "Metadata store session timeout (ZooKeeper or Oxia).",
)
ZK_OPERATION = setting(
    "ZOOKEEPER_OPERATION_TIMEOUT",
    parse_duration,
    timedelta(seconds=10),
    "Metadata store call timeout (ZooKeeper or Oxia).",
)


@dataclass(frozen=True)
class ZooKeeperConfig:
    """The metadata stores: the ZooKeeper session settings, and where Pulsar's and
    BookKeeper's metadata are (`stores`). The timeouts apply to either kind of store; the
    security settings only to ZooKeeper."""

    servers: str = "127.0.0.1:2181"
    """Connect string, `host:port[,host:port...]`."""
    chroot: str = ""
    """Path prefix applied to every znode path; empty for none."""
    session_timeout: timedelta = timedelta(seconds=30)
    """Session timeout negotiated with the ensemble."""
    operation_timeout: timedelta = timedelta(seconds=10)
    """Deadline of one ZooKeeper call; exceeding it is `Unavailable`, never "absent"."""
    security: ZooKeeperSecurity = field(default_factory=ZooKeeperSecurity)
    """Authentication, ACLs of the znodes Tombstone creates, TLS."""
    urls: MetadataStores | None = None
    """The stores `TOMBSTONE_METADATA_STORE_URL` and `TOMBSTONE_BOOKKEEPER_METADATA_URL`
    name; None: both kinds of metadata in `servers` under `chroot`."""

    @property
    def stores(self) -> MetadataStores:
        """Where Pulsar's metadata and BookKeeper's ledger metadata are."""
        return self.urls or MetadataStores.on_zookeeper(self.servers, self.chroot)

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> ZooKeeperConfig:
        chroot = ZK_CHROOT.read(environ)
        if chroot and (not chroot.startswith("/") or chroot.endswith("/")):
            raise ConfigError(ZK_CHROOT.name, "must start with '/' and not end with '/'")
        servers = ZK_SERVERS.read(environ)
        urls = MetadataStores.from_env(
            environ,
            zookeeper=StoreUrl(ZOOKEEPER, servers, chroot),
            servers=ZK_SERVERS,
            chroot=ZK_CHROOT,
        )
        return cls(
            servers=servers,
            chroot=chroot,
            session_timeout=ZK_SESSION.read(environ),
            operation_timeout=ZK_OPERATION.read(environ),
            security=ZooKeeperSecurity.from_env(environ),
            urls=urls,
        )


SYSTEM_TOPIC = "persistent://pulsar/system/__ledger_deletion"
PULSAR_URL = setting(
    "PULSAR_SERVICE_URL", parse_str, "pulsar://127.0.0.1:6650", "Pulsar broker service URL."
)
PULSAR_TOPIC = setting("PULSAR_TOPIC", parse_str, SYSTEM_TOPIC, "Ledger deletion system topic.")
PULSAR_RETRY = setting("PULSAR_RETRY_TOPIC", parse_str, f"{SYSTEM_TOPIC}-RETRY", "Retry topic.")
PULSAR_DLQ = setting("PULSAR_DLQ_TOPIC", parse_str, f"{SYSTEM_TOPIC}-DLQ", "Dead-letter topic.")
DEFAULT_PARTITIONS = 4
"""What `tombstone setup` creates and the services expect unless told otherwise (the
deletion parallelism; compose and the README say the same)."""
PULSAR_PARTITIONS = setting(
    "PULSAR_TOPIC_PARTITIONS",
    parse_int(0, 1024),
    DEFAULT_PARTITIONS,
    "Partitions of the system, retry and dead-letter topics; 0 = not partitioned.",
)
# The deleters' subscriptions and the admin API: declared here because `tombstone setup`
# creates the subscriptions and the marker checks the first one before it publishes.
SUBSCRIPTION = setting(
    "DELETER_SUBSCRIPTION", parse_str, "tombstone-deleter", "Shared subscription of the pool."
)
DLQ_SUBSCRIPTION = setting(
    "DELETER_DLQ_SUBSCRIPTION", parse_str, "tombstone-dlq", "Subscription holding dead letters."
)
# Preview (docs/deleter.md, "Preview"): `tombstone setup` creates the preview subscription
# while the deleters are in preview and removes it once they delete.
DELETER_MODE = setting(
    "DELETER_MODE",
    parse_choice("delete", "preview"),
    "delete",
    "`preview`: verify every PDLI and report what would be deleted, deleting nothing, on the "
    "preview subscription; `delete`: the deleters' work.",
)
PREVIEW_SUBSCRIPTION = setting(
    "DELETER_PREVIEW_SUBSCRIPTION",
    parse_str,
    "tombstone-preview",
    "Subscription a preview reads (the deleters' own keeps its whole backlog).",
)
ADMIN_URL = setting(
    "DELETER_PULSAR_ADMIN_URL",
    parse_str,
    "http://127.0.0.1:8080",
    "Pulsar admin HTTP API (backlogs; the marker's subscription check; `tombstone setup`).",
)
PULSAR_OPERATION = setting(
    "PULSAR_OPERATION_TIMEOUT", parse_duration, timedelta(seconds=30), "Pulsar call timeout."
)


@dataclass(frozen=True)
class PulsarConfig:
    """The Pulsar cluster and the system topics of PIP-186."""

    service_url: str = "pulsar://127.0.0.1:6650"
    """Broker service URL (`pulsar://` or `pulsar+ssl://`)."""
    topic: str = SYSTEM_TOPIC
    """The ledger deletion system topic."""
    retry_topic: str = f"{SYSTEM_TOPIC}-RETRY"
    """Where PDLIs wait before another attempt."""
    dlq_topic: str = f"{SYSTEM_TOPIC}-DLQ"
    """Where PDLIs go after the last attempt."""
    partitions: int = DEFAULT_PARTITIONS
    """Partitions of the system, retry and dead-letter topics; 0 means not partitioned."""
    operation_timeout: timedelta = timedelta(seconds=30)
    """Deadline of one Pulsar call."""
    security: PulsarSecurity = field(default_factory=PulsarSecurity)
    """TLS and authentication, for the binary client and the admin HTTP calls alike."""

    @property
    def auth_token(self) -> str | None:
        """The static token, when token authentication uses one (not its file form)."""
        return self.security.token if self.security.auth_plugin == "token" else None

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> PulsarConfig:
        url = PULSAR_URL.read(environ)
        if not url.startswith(("pulsar://", "pulsar+ssl://")):
            raise ConfigError(PULSAR_URL.name, "must start with pulsar:// or pulsar+ssl://")
        return cls(
            service_url=url,
            topic=PULSAR_TOPIC.read(environ),
            retry_topic=PULSAR_RETRY.read(environ),
            dlq_topic=PULSAR_DLQ.read(environ),
            partitions=PULSAR_PARTITIONS.read(environ),
            operation_timeout=PULSAR_OPERATION.read(environ),
            security=PulsarSecurity.from_env(
                environ, service_url=url, admin_url=ADMIN_URL.read(environ)
            ),
        )


S3_ENDPOINT = setting("S3_ENDPOINT_URL", parse_optional_str, None, "S3 endpoint; None = AWS.")
S3_REGION = setting("S3_REGION", parse_str, "us-east-1", "S3 region.")
S3_KEY_ID = setting("S3_ACCESS_KEY_ID", parse_optional_str, None, "S3 access key id.")
S3_SECRET = setting(
    "S3_SECRET_ACCESS_KEY", parse_optional_str, None, "S3 secret access key.", secret=True
)
S3_BUCKETS: Setting[tuple[str, ...]] = setting(
    "S3_ALLOWED_BUCKETS", parse_list, (), "Comma-separated buckets the service may touch."
)
S3_ENDPOINTS: Setting[tuple[str, ...]] = setting(
    "S3_ALLOWED_ENDPOINTS",
    parse_list,
    (),
    "Comma-separated S3 endpoints (scheme://host[:port]) an offload record may name, besides "
    "TOMBSTONE_S3_ENDPOINT_URL; empty: only that one. The same credentials serve every one.",
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REGION = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")


def canonical_endpoint(url: str) -> str:
    """`scheme://host[:port]` of an S3 endpoint, lowercased, without a default port.

    Two spellings of one endpoint (`HTTP://S3.Example:443/`, `https://s3.example`) must compare
    equal against an allow-list, and nothing but the host may steer where a request goes: an
    endpoint with a path, query, fragment or user info is refused (`ValueError`). A missing
    scheme is https, as the AWS SDKs read one.
    """
    text = url.strip()
    if "://" not in text:
        text = "https://" + text
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r} is not an endpoint URL: {exc}") from exc
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError(f"{url!r} is not an http(s)://host[:port] endpoint")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"{url!r} has more than scheme, host and port")
    if ":" in host:
        host = f"[{host}]"  # IPv6 literal
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def check_region(region: str) -> str:
    """A region name as S3 spells them; anything else is refused (`ValueError`). Without an
    endpoint the region is part of the host the SDK builds, so it must be a plain label."""
    if not _REGION.fullmatch(region):
        raise ValueError(f"{region!r} is not a region name")
    return region


@dataclass(frozen=True)
class S3Config:
    """Tiered storage (offloaded ledgers)."""

    endpoint_url: str | None = None
    """S3-compatible endpoint (MinIO, moto); None uses AWS."""
    region: str = "us-east-1"
    """Region name."""
    access_key_id: str | None = None
    """Access key; None uses the default AWS credential chain."""
    secret_access_key: str | None = field(default=None, repr=False)
    """Secret key paired with `access_key_id`."""
    allowed_buckets: frozenset[str] = frozenset()
    """Buckets the service may read or delete in. Empty allows none: deployments name them."""
    extra_endpoints: frozenset[str] = frozenset()
    """Canonical endpoints (`canonical_endpoint`) an offload record may name besides
    `endpoint_url`."""

    @property
    def default_endpoint(self) -> str | None:
        """`endpoint_url` in canonical form; None is AWS (the region picks the host)."""
        return None if self.endpoint_url is None else canonical_endpoint(self.endpoint_url)

    @property
    def allowed_endpoints(self) -> frozenset[str]:
        """Every canonical endpoint an offload record may name: the configured one and the
        extra ones. A record naming none uses the configured one."""
        default = self.default_endpoint
        return self.extra_endpoints | ({default} if default is not None else set())

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> S3Config:
        key_id, secret = S3_KEY_ID.read(environ), S3_SECRET.read(environ)
        if (key_id is None) != (secret is None):
            missing = S3_KEY_ID.name if key_id is None else S3_SECRET.name
            raise ConfigError(missing, "access key id and secret must be set together")
        endpoint = S3_ENDPOINT.read(environ)
        try:
            if endpoint is not None:
                canonical_endpoint(endpoint)
        except ValueError as exc:
            raise ConfigError(S3_ENDPOINT.name, str(exc)) from exc
        try:
            extra = frozenset(canonical_endpoint(e) for e in S3_ENDPOINTS.read(environ))
        except ValueError as exc:
            raise ConfigError(S3_ENDPOINTS.name, str(exc)) from exc
        return cls(
            endpoint_url=endpoint,
            region=S3_REGION.read(environ),
            access_key_id=key_id,
            secret_access_key=secret,
            allowed_buckets=frozenset(S3_BUCKETS.read(environ)),
            extra_endpoints=extra,
        )


# --- other clusters sharing the BookKeeper (docs/design.md §3, S2) --------------------------------

SHARED_CLUSTERS: Setting[tuple[SharedCluster, ...]] = setting(
    "SHARED_CLUSTERS",
    parse_shared_clusters,
    (),
    "Other Pulsar clusters sharing this BookKeeper's ledgers root: white-space separated "
    "<cluster>=<metadata store URL> (zk:host:port[,...][/chroot], or host:port[/chroot]). A "
    "ledger is unreferenced only when none of them references it either.",
    format="cluster=URL list",
)
CONFIGURATION_STORE: Setting[StoreUrl | None] = setting(
    "CONFIGURATION_STORE",
    parse_store_url,
    None,
    "Pulsar's configuration store (configurationMetadataStoreUrl), where namespace policies "
    "live, when it is not the metadata store (zk:host:port[,...][/chroot]).",
    format="metadata store URL",
)


# --- offload defaults (Pulsar 2.1 contexts) ------------------------------------------------

# Offload drivers whose objects live behind the S3 API (the only blob store Tombstone reads);
# Pulsar 2.1 named its offloader `S3` (matched case-insensitively).
S3_DRIVERS = ("aws-s3", "s3")
OFFLOAD_DEFAULT_DRIVER = setting(
    "OFFLOAD_DEFAULT_DRIVER",
    parse_choice(*S3_DRIVERS),
    "aws-s3",
    "Driver of ledgers offloaded without driver metadata (Pulsar 2.1); used with the bucket.",
)
OFFLOAD_DEFAULT_BUCKET = setting(
    "OFFLOAD_DEFAULT_BUCKET",
    parse_optional_str,
    None,
    "Bucket of ledgers offloaded without driver metadata (Pulsar 2.1); unset: none applies.",
    format="bucket name",
)


@dataclass(frozen=True)
class OffloadDefaults:
    """The operator's offloader, for offload contexts written by Pulsar 2.1.

    Pulsar 2.1 wrote only `uidMsb/uidLsb/complete`: no driver name, no bucket. Pulsar itself
    deletes such objects from the *currently configured* bucket, so the same two settings are
    read by the marker, the verifier and the reconciler (shared `TOMBSTONE_OFFLOAD_DEFAULT_*`
    names) and all three resolve such a context to the same place.
    """

    driver: str = "aws-s3"
    """Driver name put in place of the missing one (an S3-API driver)."""
    bucket: str | None = None
    """Bucket put in place of the missing one; None: no default, such PDLIs are UNSUPPORTED."""

    @property
    def configured(self) -> bool:
        return self.bucket is not None

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> OffloadDefaults:
        return cls(
            driver=OFFLOAD_DEFAULT_DRIVER.read(environ),
            bucket=OFFLOAD_DEFAULT_BUCKET.read(environ),
        )
