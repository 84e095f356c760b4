"""The devstack broker's token checks, as Pulsar's `AuthenticationProviderToken` makes them:
the signature with the secret (HS256) or public key (RS256), `exp`, the role from `sub`."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from devstack.pulsar import jwt

SECRET = b"devstack-secret-key-of-32-bytes!"


def _keys() -> tuple[bytes, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def test_hs256_and_rs256_tokens_name_their_role() -> None:
    private, public = _keys()
    hs = jwt.encode({"sub": "tombstone"}, secret=SECRET)
    rs = jwt.encode({"sub": "admin", "exp": 2000}, private_key=private)
    assert (
        jwt.decode(hs, secret=SECRET)["sub"],
        jwt.decode(rs, public_key=public, now=1999)["sub"],
    ) == ("tombstone", "admin")


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        ({"sub": "x", "exp": 1000}, "expired"),
        ({"exp": 3000}, "no role"),
        ({"sub": ""}, "no role"),
    ],
)
def test_expired_or_roleless_tokens_are_refused(claims: dict[str, object], problem: str) -> None:
    token = jwt.encode(claims, secret=SECRET)
    with pytest.raises(jwt.InvalidToken, match=problem):
        jwt.decode(token, secret=SECRET, now=2000)


def test_a_token_signed_with_another_key_is_refused() -> None:
    private, _ = _keys()
    _, other_public = _keys()
    forged = jwt.encode({"sub": "x"}, private_key=private)
    with pytest.raises(jwt.InvalidToken, match="bad signature"):
        jwt.decode(forged, public_key=other_public)


def test_an_algorithm_without_a_configured_key_is_refused() -> None:
    """An HS256 token against a broker holding only a public key (no algorithm confusion)."""
    _, public = _keys()
    token = jwt.encode({"sub": "x"}, secret=public)
    with pytest.raises(jwt.InvalidToken, match="no key"):
        jwt.decode(token, public_key=public)


def test_garbage_is_malformed() -> None:
    with pytest.raises(jwt.InvalidToken, match="malformed"):
        jwt.decode("not-a-token", secret=SECRET)
