"""How Tombstone proves who it is to ZooKeeper and who may touch the znodes it creates.

`ZooKeeperSecurity` is read once from `TOMBSTONE_ZOOKEEPER_*` settings and carried inside
`ZooKeeperConfig` (services) and the reconciler's settings. The ZooKeeper adapter turns it
into an `addauth digest` packet on every connection, the ACL of every znode Tombstone creates,
and a TLS connection. What the client cannot carry (SASL) is refused here, before any
connection: silently connecting without the security asked for would be worse than not
starting.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from services.core._env import (
    parse_bool,
    parse_choice,
    parse_optional_str,
    setting,
)
from services.core.errors import ConfigError, FailedPrecondition

Environ = Mapping[str, str]

READ_WORLD = "world"
READ_OWNER = "owner"

DIGEST_USER = setting(
    "ZOOKEEPER_AUTH_DIGEST_USER",
    parse_optional_str,
    None,
    "ZooKeeper digest user (`addauth digest user:password`); Tombstone's znodes become "
    "writable only by it. Unset: no authentication, world-writable znodes.",
)
DIGEST_PASSWORD = setting(
    "ZOOKEEPER_AUTH_DIGEST_PASSWORD",
    parse_optional_str,
    None,
    "Password of the ZooKeeper digest user.",
    secret=True,
)
DIGEST_PASSWORD_FILE = setting(
    "ZOOKEEPER_AUTH_DIGEST_PASSWORD_FILE",
    parse_optional_str,
    None,
    "File holding the digest user's password (a mounted secret); a trailing newline is "
    "dropped. Exclusive with TOMBSTONE_ZOOKEEPER_AUTH_DIGEST_PASSWORD.",
    format="path",
)
ACL_READ = setting(
    "ZOOKEEPER_ACL_READ",
    parse_choice(READ_WORLD, READ_OWNER),
    READ_WORLD,
    "Who may read the znodes Tombstone creates when digest authentication is on: world "
    "(anyone) or owner (only Tombstone's digest user).",
)
SASL = setting(
    "ZOOKEEPER_SASL",
    parse_bool,
    False,
    "Authenticate to ZooKeeper with SASL (Kerberos, DIGEST-MD5). Not supported: true refuses "
    "to start.",
)
TLS = setting(
    "ZOOKEEPER_TLS",
    parse_bool,
    False,
    "Connect to ZooKeeper over TLS (its secureClientPort).",
)
TLS_CA_FILE = setting(
    "ZOOKEEPER_TLS_CA_FILE",
    parse_optional_str,
    None,
    "PEM CA bundle that signs the ZooKeeper servers' certificates (default: the system's).",
    format="path",
)
TLS_CERT_FILE = setting(
    "ZOOKEEPER_TLS_CERT_FILE",
    parse_optional_str,
    None,
    "PEM client certificate for ZooKeeper (servers with ssl.clientAuth=need).",
    format="path",
)
TLS_KEY_FILE = setting(
    "ZOOKEEPER_TLS_KEY_FILE",
    parse_optional_str,
    None,
    "PEM private key of TOMBSTONE_ZOOKEEPER_TLS_CERT_FILE.",
    format="path",
)
TLS_VERIFY_HOSTNAME = setting(
    "ZOOKEEPER_TLS_VERIFY_HOSTNAME",
    parse_bool,
    True,
    "Check that each ZooKeeper server's certificate names the host it was reached by.",
)


class ZooKeeperRefused(FailedPrecondition):
    """ZooKeeper security that cannot be honoured, or that ZooKeeper turned down (a failed
    authentication, a znode writable by others): starting would be wrong. One line, naming
    the setting or the command that fixes it."""


@dataclass(frozen=True)
class ZooKeeperTls:
    """Client-side TLS to ZooKeeper's secure client port."""

    ca_file: str | None = None
    """PEM CA bundle; None: the system's trust store."""
    cert_file: str | None = None
    key_file: str | None = None
    verify_hostname: bool = True


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """Authentication, ACLs and transport security of every ZooKeeper session."""

    digest_user: str | None = None
    """The digest identity (`addauth digest user:password`); None: no authentication."""
    digest_password: str = field(default="", repr=False)
    read: str = READ_WORLD
    """Who may read Tombstone's znodes: `world` or `owner` (the digest user alone)."""
    sasl: bool = False
    """Asked for SASL; never honoured (see `refusal`)."""
    tls: ZooKeeperTls | None = None

    @property
    def authenticated(self) -> bool:
        return self.digest_user is not None

    @classmethod
    def from_env(cls, environ: Environ = os.environ) -> ZooKeeperSecurity:
        user = DIGEST_USER.read(environ)
        password = _password(environ)
        if user is None and password is not None:
            raise ConfigError(DIGEST_USER.name, "a digest password is set but no user")
        if user is not None:
            if ":" in user:
                raise ConfigError(DIGEST_USER.name, "must not contain ':'")
            if password is None:
                raise ConfigError(
                    DIGEST_PASSWORD.name, f"required with {DIGEST_USER.name} (or its _FILE form)"
                )
        return cls(
            digest_user=user,
            digest_password=password or "",
            read=ACL_READ.read(environ),
            sasl=SASL.read(environ),
            tls=_tls(environ),
        )

    def refusal(self) -> str | None:
        """Why this configuration cannot be honoured (one line naming the setting), or
        None. SASL needs a SASL exchange (opcode 102) driven by a GSSAPI or DIGEST-MD5
        client, which the ZooKeeper client library does not have."""
        if self.sasl:
            return (
                f"{SASL.name}=true: SASL authentication to ZooKeeper is not supported; "
                f"use digest authentication ({DIGEST_USER.name}) over TLS instead"
            )
        return None

    def check(self) -> None:
        """`ZooKeeperRefused` when `refusal()` says why this cannot be honoured."""
        reason = self.refusal()
        if reason is not None:
            raise ZooKeeperRefused(reason)


def _password(environ: Environ) -> str | None:
    inline = DIGEST_PASSWORD.read(environ)
    path = DIGEST_PASSWORD_FILE.read(environ)
    if inline is not None and path is not None:
        raise ConfigError(DIGEST_PASSWORD_FILE.name, f"set either it or {DIGEST_PASSWORD.name}")
    if path is None:
        return inline
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(DIGEST_PASSWORD_FILE.name, f"cannot read {path}: {e.strerror}") from e
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise ConfigError(DIGEST_PASSWORD_FILE.name, f"{path} is empty")
    return password


def _tls(environ: Environ) -> ZooKeeperTls | None:
    files = {s.name: s.read(environ) for s in (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE)}
    if not TLS.read(environ):
        given = [name for name, value in files.items() if value is not None]
        if given:
            raise ConfigError(given[0], f"set {TLS.name}=true to use it")
        return None
    for name, value in files.items():
        if value is not None and not Path(value).is_file():
            raise ConfigError(name, f"no such file: {value}")
    cert, key = files[TLS_CERT_FILE.name], files[TLS_KEY_FILE.name]
    if (cert is None) != (key is None):
        raise ConfigError(TLS_KEY_FILE.name, f"set together with {TLS_CERT_FILE.name}")
    tls = ZooKeeperTls(
        ca_file=files[TLS_CA_FILE.name],
        cert_file=cert,
        key_file=key,
        verify_hostname=TLS_VERIFY_HOSTNAME.read(environ),
    )
    _load(tls)
    return tls


def _load(tls: ZooKeeperTls) -> None:
    """Load the files once now, so that a bad one is named at start-up, not at connect."""
    try:
        context = ssl.create_default_context(cafile=tls.ca_file)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(TLS_CA_FILE.name, f"not a PEM CA bundle: {e}") from e
    if tls.cert_file is not None:
        try:
            context.load_cert_chain(tls.cert_file, tls.key_file)
        except (ssl.SSLError, OSError) as e:
            raise ConfigError(TLS_CERT_FILE.name, f"certificate and key do not load: {e}") from e
