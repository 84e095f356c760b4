"""Who is connecting: the credential of a CONNECT or of an admin call, checked as Pulsar's
providers do (`AuthenticationProviderToken`: a JWT in `auth_data` or `Authorization: Bearer`;
`AuthenticationProviderTls`: the client certificate's common name). OAuth2 clients send the
issuer's access token with method `token`, which the broker checks with the same provider."""

from __future__ import annotations

import ssl
from typing import Any

from . import jwt
from .security import BrokerSecurity

AUTHENTICATION_FAILED = "Failed to authenticate"
"""The message of Pulsar's `ServerCnx.handleConnect` when a provider refuses the client."""


class AuthenticationFailed(Exception):
    """No credential, an unknown method, or a credential the provider refuses."""


def common_name(peercert: dict[str, Any] | None) -> str | None:
    """The CN of a verified client certificate (`ssl.SSLSocket.getpeercert()`)."""
    for rdn in (peercert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def authenticate(
    security: BrokerSecurity, method: str, data: bytes, ssl_object: ssl.SSLObject | None
) -> str:
    """The role of a client authenticating with `method` and `data`."""
    if method == "token":
        try:
            return security.role_of_token(data.decode())
        except (jwt.InvalidToken, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(f"token: {exc}") from exc
    if method == "tls":
        role = common_name(ssl_object.getpeercert() if ssl_object is not None else None)
        if role is None:
            raise AuthenticationFailed("tls: no verified client certificate")
        return role
    raise AuthenticationFailed(f"unsupported authentication method {method or 'none'!r}")


def authenticate_http(
    security: BrokerSecurity, authorization: str | None, ssl_object: ssl.SSLObject | None
) -> str:
    """The role of an admin call: a bearer token, else the client certificate."""
    if authorization:
        scheme, _, credential = authorization.partition(" ")
        if scheme.lower() != "bearer" or not credential.strip():
            raise AuthenticationFailed("only Bearer tokens are accepted")
        return authenticate(security, "token", credential.strip().encode(), ssl_object)
    return authenticate(security, "tls", b"", ssl_object)
