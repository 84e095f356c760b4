"""Just enough JSON Web Token for the devstack broker: HS256 and RS256, signed and checked.

The broker validates tokens as Pulsar's `AuthenticationProviderToken` does: the signature with
the configured secret key (`tokenSecretKey`, HMAC) or public key (`tokenPublicKey`, RSA), then
`exp` when present, and the role is the `sub` claim (`tokenAuthClaim` default).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa


class InvalidToken(Exception):
    """The token is malformed, badly signed, expired or names no role."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode(
    claims: dict[str, Any], *, secret: bytes | None = None, private_key: bytes | None = None
) -> str:
    """A compact JWT: HS256 with `secret`, or RS256 with a PEM `private_key`."""
    alg = "HS256" if secret is not None else "RS256"
    head = _b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    signed = f"{head}.{body}".encode()
    if secret is not None:
        signature = hmac.new(secret, signed, hashlib.sha256).digest()
    else:
        assert private_key is not None
        key = serialization.load_pem_private_key(private_key, password=None)
        assert isinstance(key, rsa.RSAPrivateKey)
        signature = key.sign(signed, padding.PKCS1v15(), hashes.SHA256())
    return f"{head}.{body}.{_b64(signature)}"


def decode(
    token: str,
    *,
    secret: bytes | None = None,
    public_key: bytes | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The claims of a token signed with `secret` (HS256) or the PEM `public_key` (RS256)."""
    try:
        head_text, body_text, signature_text = token.split(".")
        head = json.loads(_unb64(head_text))
        claims = json.loads(_unb64(body_text))
        signature = _unb64(signature_text)
    except ValueError as exc:
        raise InvalidToken(f"malformed token: {exc}") from exc
    if not isinstance(head, dict) or not isinstance(claims, dict):
        raise InvalidToken("malformed token")
    signed = f"{head_text}.{body_text}".encode()
    alg = head.get("alg")
    if alg == "HS256" and secret is not None:
        expected = hmac.new(secret, signed, hashlib.sha256).digest()
        if not hmac.compare_digest(expected, signature):
            raise InvalidToken("bad signature")
    elif alg == "RS256" and public_key is not None:
        key = serialization.load_pem_public_key(public_key)
        assert isinstance(key, rsa.RSAPublicKey)
        try:
            key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature as exc:
            raise InvalidToken("bad signature") from exc
    else:
        raise InvalidToken(f"no key for algorithm {alg!r}")
    expiry = claims.get("exp")
    if expiry is not None and not isinstance(expiry, int | float):
        raise InvalidToken("exp is not a number")
    if expiry is not None and (now if now is not None else time.time()) >= expiry:
        raise InvalidToken("token expired")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise InvalidToken("no role (sub) in the token")
    return claims
