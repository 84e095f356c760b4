"""How Tombstone reaches a secured Pulsar cluster: TLS trust, hostname verification, a client
certificate, and the authentication plugin (token, OAuth2 client credentials, TLS).

One group serves the binary client (producers and consumers) and every admin HTTP call, so
the two never disagree. The names follow Pulsar's `client.conf` (`tlsTrustCertsFilePath`,
`tlsEnableHostnameVerification`, `tlsCertificateFilePath`, `tlsKeyFilePath`, `authPlugin`,
`authParams`); OAuth2's parameters are those of the client's `AuthenticationOauth2`
(`issuer_url`, `private_key`, `audience`, `scope`). Every combination is checked at start-up,
and a refusal names the setting to fix.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from services.core._env import (
    _described,
    parse_choice,
    parse_optional_bool,
    parse_optional_str,
    setting,
)
from services.core.errors import ConfigError

Environ = Mapping[str, str]


def _parse_file(raw: str) -> Path:
    """A readable file; `file://` and `file:` prefixes (as Pulsar's authParams write them) are
    accepted."""
    path = Path(_strip_file_scheme(raw)).expanduser()
    if not path.is_file():
        raise ValueError(f"{path} is not a readable file")
    return path


def _parse_optional_file(raw: str) -> Path | None:
    return _parse_file(raw)


parse_optional_file = _described("path", _parse_optional_file)


def _strip_file_scheme(raw: str) -> str:
    for prefix in ("file://", "file:"):
        if raw.startswith(prefix):
            return raw[len(prefix) :]
    return raw


TLS_TRUST = setting(
    "PULSAR_TLS_TRUST_CERTS_FILE_PATH",
    parse_optional_file,
    None,
    "CA certificates (PEM) trusted for the broker's TLS, binary and admin (tlsTrustCertsFilePath).",
)
TLS_HOSTNAME = setting(
    "PULSAR_TLS_ENABLE_HOSTNAME_VERIFICATION",
    parse_optional_bool,
    None,
    "Check the broker certificate names the host (tlsEnableHostnameVerification); "
    "default on for pulsar+ssl:// and https://.",
)
TLS_CERT = setting(
    "PULSAR_TLS_CERTIFICATE_FILE_PATH",
    parse_optional_file,
    None,
    "Client certificate (PEM) for mutual TLS (tlsCertificateFilePath); with the key file.",
)
TLS_KEY = setting(
    "PULSAR_TLS_KEY_FILE_PATH",
    parse_optional_file,
    None,
    "Private key (PEM) of the client certificate (tlsKeyFilePath).",
)
AUTH_PLUGIN = setting(
    "PULSAR_AUTH_PLUGIN",
    parse_choice("none", "token", "oauth2", "tls"),
    "none",
    "Pulsar authentication (authPlugin): none, token, oauth2 (client credentials) or tls "
    "(AuthenticationTls, the client certificate); a token alone implies token.",
)
AUTH_TOKEN = setting(
    "PULSAR_AUTH_TOKEN", parse_optional_str, None, "Pulsar JWT token.", secret=True
)
AUTH_TOKEN_FILE = setting(
    "PULSAR_AUTH_TOKEN_FILE",
    parse_optional_file,
    None,
    "File holding the Pulsar JWT token (authParams file:///path); read again at each use.",
)
OAUTH2_ISSUER = setting(
    "PULSAR_OAUTH2_ISSUER_URL",
    parse_optional_str,
    None,
    "OAuth2 issuer (issuer_url); its /.well-known/openid-configuration names the token endpoint.",
)
OAUTH2_KEY = setting(
    "PULSAR_OAUTH2_PRIVATE_KEY",
    parse_optional_file,
    None,
    "OAuth2 credentials file (private_key): JSON with client_id and client_secret.",
)
OAUTH2_AUDIENCE = setting(
    "PULSAR_OAUTH2_AUDIENCE", parse_optional_str, None, "OAuth2 audience of the Pulsar cluster."
)
OAUTH2_SCOPE = setting(
    "PULSAR_OAUTH2_SCOPE", parse_optional_str, None, "OAuth2 scope of the access request."
)


@dataclass(frozen=True)
class OAuth2Credentials:
    """Client credentials for the issuer, as Pulsar's `AuthenticationOauth2` takes them."""

    issuer_url: str
    private_key: Path
    """The credentials file (JSON `client_id`, `client_secret`)."""
    client_id: str
    client_secret: str = field(repr=False)
    audience: str | None = None
    scope: str | None = None

    def auth_params(self) -> str:
        """The JSON `AuthenticationOauth2` takes (`issuer_url`, `private_key`, ...)."""
        params = {"issuer_url": self.issuer_url, "private_key": str(self.private_key)}
        if self.audience:
            params["audience"] = self.audience
        if self.scope:
            params["scope"] = self.scope
        return json.dumps(params)


@dataclass(frozen=True)
class PulsarSecurity:
    """TLS and authentication towards the broker, for the binary and the admin protocol."""

    trust_certs: Path | None = None
    """CA bundle for the broker's certificate; None: the system's trust store."""
    hostname_verification: bool = True
    """Whether the certificate must name the host of the URL (TLS only)."""
    client_cert: Path | None = None
    client_key: Path | None = None
    auth_plugin: str = "none"
    """`none`, `token`, `oauth2` or `tls`."""
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None
    oauth2: OAuth2Credentials | None = None

    def token_supplier(self) -> Callable[[], str] | None:
        """The token to send, read again from its file each time (rotation without restart)."""
        if self.auth_plugin != "token":
            return None
        if self.token_file is not None:
            path = self.token_file
            return lambda: path.read_text(encoding="utf-8").strip()
        token = self.token or ""
        return lambda: token

    def ssl_context(self) -> ssl.SSLContext:
        """The context of the admin HTTPS calls (and the OAuth2 issuer's)."""
        context = ssl.create_default_context(
            cafile=str(self.trust_certs) if self.trust_certs else None
        )
        context.check_hostname = self.hostname_verification
        if self.client_cert is not None and self.client_key is not None:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    @classmethod
    def from_env(
        cls, environ: Environ, *, service_url: str, admin_url: str | None = None
    ) -> PulsarSecurity:
        """The settings, checked together and against the URLs they serve."""
        urls = [service_url] + ([admin_url] if admin_url else [])
        tls_used = any(_is_tls(url) for url in urls)
        trust = TLS_TRUST.read(environ)
        verify = TLS_HOSTNAME.read(environ)
        cert, key = TLS_CERT.read(environ), TLS_KEY.read(environ)
        if not tls_used:
            for name, value in ((TLS_TRUST, trust), (TLS_HOSTNAME, verify), (TLS_CERT, cert)):
                if value is not None:
                    raise ConfigError(
                        name.name, "is set but no Pulsar URL uses TLS (pulsar+ssl://, https://)"
                    )
        if (cert is None) != (key is None):
            missing = TLS_KEY if key is None else TLS_CERT
            raise ConfigError(missing.name, "the client certificate and its key go together")
        plugin = _plugin(environ)
        token, token_file = AUTH_TOKEN.read(environ), AUTH_TOKEN_FILE.read(environ)
        if plugin == "token" and token and token_file:
            raise ConfigError(AUTH_TOKEN_FILE.name, f"set it or {AUTH_TOKEN.name}, not both")
        if plugin != "token" and (token or token_file):
            shown = AUTH_TOKEN.name if token else AUTH_TOKEN_FILE.name
            raise ConfigError(shown, f"a token does not go with {AUTH_PLUGIN.name}={plugin}")
        if plugin == "tls" and cert is None:
            raise ConfigError(TLS_CERT.name, "authPlugin tls authenticates with this certificate")
        if plugin == "tls" and not _is_tls(service_url):
            raise ConfigError(AUTH_PLUGIN.name, "tls authentication needs a pulsar+ssl:// URL")
        oauth2 = _oauth2(environ) if plugin == "oauth2" else None
        if plugin != "oauth2":
            for unused in (OAUTH2_ISSUER, OAUTH2_KEY, OAUTH2_AUDIENCE, OAUTH2_SCOPE):
                if unused.read(environ) is not None:
                    raise ConfigError(unused.name, f"is set but {AUTH_PLUGIN.name} is {plugin}")
        return cls(
            trust_certs=trust,
            hostname_verification=True if verify is None else verify,
            client_cert=cert,
            client_key=key,
            auth_plugin=plugin,
            token=token,
            token_file=token_file,
            oauth2=oauth2,
        )


def _is_tls(url: str) -> bool:
    return url.startswith(("pulsar+ssl://", "https://"))


def _plugin(environ: Environ) -> str:
    """The declared plugin; a token alone (the form before the plugin existed) means token."""
    declared = environ.get(AUTH_PLUGIN.name, "").strip()
    if not declared and (AUTH_TOKEN.read(environ) or AUTH_TOKEN_FILE.read(environ)):
        return "token"
    plugin = AUTH_PLUGIN.read(environ)
    if plugin == "token" and not (AUTH_TOKEN.read(environ) or AUTH_TOKEN_FILE.read(environ)):
        raise ConfigError(AUTH_TOKEN.name, f"{AUTH_PLUGIN.name}=token needs a token (or its file)")
    return plugin


def _oauth2(environ: Environ) -> OAuth2Credentials:
    issuer = OAUTH2_ISSUER.read(environ)
    if not issuer:
        raise ConfigError(OAUTH2_ISSUER.name, f"{AUTH_PLUGIN.name}=oauth2 needs the issuer URL")
    parts = urllib.parse.urlsplit(issuer)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(OAUTH2_ISSUER.name, "must be an http:// or https:// URL")
    key_file = OAUTH2_KEY.read(environ)
    if key_file is None:
        raise ConfigError(OAUTH2_KEY.name, f"{AUTH_PLUGIN.name}=oauth2 needs the credentials file")
    try:
        credentials = json.loads(key_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(OAUTH2_KEY.name, f"cannot read {key_file} as JSON: {exc}") from exc
    if not isinstance(credentials, dict) or not all(
        isinstance(credentials.get(name), str) and credentials.get(name)
        for name in ("client_id", "client_secret")
    ):
        raise ConfigError(OAUTH2_KEY.name, f"{key_file} must hold client_id and client_secret")
    return OAuth2Credentials(
        issuer_url=issuer.rstrip("/"),
        private_key=key_file,
        client_id=credentials["client_id"],
        client_secret=credentials["client_secret"],
        audience=OAUTH2_AUDIENCE.read(environ),
        scope=OAUTH2_SCOPE.read(environ),
    )
