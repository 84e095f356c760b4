"""Signing keys from files, inline material or generation (docs/design.md §4.7).

Private keys are PKCS#8 PEM or the base64 of the 32-byte seed; public keys are
SubjectPublicKeyInfo PEM or the base64 of the 32 raw bytes. A key entry in a variable is
`[id=]source`, the source a path or `base64:<key>` (for secrets passed in the environment);
the id defaults to the key's fingerprint (`signing.key_id_of`).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from services.core.signing import KEY_ID, IntentSigner, TrustedKeys, check_key_id, key_id_of

INLINE_PREFIX = "base64:"
"""A key entry starting with this holds the raw key itself (for secrets in the environment)."""


@dataclass(frozen=True)
class KeyPair:
    key_id: str
    private_pem: bytes
    public_pem: bytes


def generate_key_pair() -> KeyPair:
    """A new Ed25519 key pair: PKCS#8 PEM private key, SubjectPublicKeyInfo PEM public key."""
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    return KeyPair(
        key_id=key_id_of(public),
        private_pem=private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        public_pem=public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )


def write_key_pair(directory: Path, pair: KeyPair, name: str | None = None) -> tuple[Path, Path]:
    """`<name>.key` (owner-only) and `<name>.pub` in `directory`; name defaults to the key id."""
    stem = check_key_id(name or pair.key_id)
    directory.mkdir(parents=True, exist_ok=True)
    private, public = directory / f"{stem}.key", directory / f"{stem}.pub"
    for path in (private, public):
        if path.exists():
            raise FileExistsError(f"{path} exists; keys are never overwritten")
    private.touch(mode=0o600)
    private.write_bytes(pair.private_pem)
    public.write_bytes(pair.public_pem)
    return private, public


def _entries(raw: str) -> Iterable[tuple[str | None, str]]:
    """`[id=]source` entries of a comma-separated list; a source is a path or inline key."""
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        name, sep, source = entry.partition("=")
        if sep and not name.startswith(INLINE_PREFIX) and KEY_ID.match(name):
            yield check_key_id(name), source.strip()
        else:
            yield None, entry


def _material(source: str) -> bytes:
    if source.startswith(INLINE_PREFIX):
        return source[len(INLINE_PREFIX) :].encode()
    return Path(source).read_bytes()


def _where(source: str) -> str:
    return "inline key" if source.startswith(INLINE_PREFIX) else source


def load_private_key(source: str) -> Ed25519PrivateKey:
    """A private key from a file or inline `base64:`: PKCS#8 PEM or the base64 32-byte seed."""
    data = _material(source).strip()
    if data.startswith(b"-----BEGIN"):
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{_where(source)}: not an Ed25519 private key")
        return key
    return Ed25519PrivateKey.from_private_bytes(_raw32(data, source))


def load_public_key(source: str) -> Ed25519PublicKey:
    """A public key from a file or inline `base64:`: SubjectPublicKeyInfo PEM or the base64
    32 raw bytes. A private key is refused: the verifier must never hold one."""
    data = _material(source).strip()
    if b"PRIVATE KEY" in data:
        raise ValueError(f"{_where(source)} is a private key; give the public key (.pub)")
    if data.startswith(b"-----BEGIN"):
        key = serialization.load_pem_public_key(data)
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError(f"{_where(source)}: not an Ed25519 public key")
        return key
    return Ed25519PublicKey.from_public_bytes(_raw32(data, source))


def _raw32(data: bytes, source: str) -> bytes:
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise ValueError(f"{_where(source)}: expected PEM or the base64 of 32 raw key bytes")
    return raw


def parse_signing_keys(raw: str) -> dict[str, Ed25519PrivateKey]:
    """`TOMBSTONE_MARKER_SIGNING_KEYS`: comma-separated `[id=]path` (or `[id=]base64:...`)."""
    keys: dict[str, Ed25519PrivateKey] = {}
    for name, source in _entries(raw):
        key = load_private_key(source)
        key_id = name or key_id_of(key.public_key())
        if key_id in keys:
            raise ValueError(f"key id {key_id} is given twice")
        keys[key_id] = key
    return keys


def parse_trusted_keys(raw: str) -> TrustedKeys:
    """`TOMBSTONE_VERIFIER_TRUSTED_KEYS`: comma-separated `[id=]path` (or inline) public keys."""
    keys: dict[str, Ed25519PublicKey] = {}
    for name, source in _entries(raw):
        key = load_public_key(source)
        key_id = name or key_id_of(key)
        if key_id in keys:
            raise ValueError(f"key id {key_id} is given twice")
        keys[key_id] = key
    return TrustedKeys(keys)


def build_signer(keys: Mapping[str, Ed25519PrivateKey], active: str) -> IntentSigner | None:
    """The marker's signer: None without keys; the only key, or the named active one."""
    if not keys:
        if active:
            raise ValueError("an active key id is set but no signing key is configured")
        return None
    if not active:
        if len(keys) > 1:
            raise ValueError(f"several signing keys {sorted(keys)}: name the active one")
        active = next(iter(keys))
    return IntentSigner(keys, active)
