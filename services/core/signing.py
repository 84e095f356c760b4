"""Signed intents (docs/design.md §4.7): Ed25519 over a canonical encoding of PDLIs.

The marker signs every PDLI it sends with its active key; the verifier holds public keys only
and checks the signature before deciding. What is signed is our own byte encoding, defined
below field by field, never the protobuf serialization (which is not canonical: field order,
map order and unknown fields may differ between encoders, and the retry path re-encodes).

Canonical encoding, version 1:

    b"tombstone/pdli-signature\\x00" || 0x01
    ledger_id          presence byte (0/1), then int64
    ledger_type        int32
    component          int32
    topic_name, managed_ledger_name, cursor_name, schema_id      string each
    offload_context    presence byte, then: uuid_msb int64, uuid_lsb int64, driver_name
                       string, driver_metadata (uint32 count, then key and value strings
                       sorted by key bytes), complete byte, bookkeeper_deleted byte,
                       timestamp_ms int64
    fence_token        presence byte, then int64
    marked_at_ms       int64
    source             int32
    marker_id, cluster, request_id                                string each

Canonical encoding, version 2: the same with version byte 0x02, followed by

    seen_at_ms         int64

Version 2 is used exactly when `seen_at_ms` is set (not 0), so a PDLI without it signs
byte for byte as before the field existed (the golden vectors hold), and one with it has it
covered: a verifier that reads the field builds the bytes the sender signed, and one that
predates it (and sees an unknown field) builds version 1 bytes, which fail: such a PDLI is
dead-lettered as badly signed there, never trusted with a stamp nobody checked.

Integers are big-endian two's complement; a string is a uint32 byte length and its UTF-8
bytes. Every field of `PendingDeleteLedgerInfo` is covered except `not_before_ms` (the retry
path and the DLQ replay rewrite it), `signing_key_id` and `signature`. A field added to the
PDLI that the verifier must trust needs a new version of this encoding (as `seen_at_ms` had).

The signature covers these bytes through a hash tree, so that PDLIs sent together share one
Ed25519 signature (`signature_tree.py` defines the tree and the `signature` field's layout).
"""

from __future__ import annotations

import hashlib
import re
import struct
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from enum import Enum

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from services.core import signature_tree as tree
from tombstone.v1 import pending_delete_pb2 as _pd

DOMAIN = b"tombstone/pdli-signature\x00"
"""Domain separation: these bytes are never a valid message of another protocol."""
VERSION = 1
VERSION_SEEN = 2
"""The encoding of a PDLI whose `seen_at_ms` is set."""
_PREFIX = DOMAIN + bytes([VERSION])
_PREFIX_SEEN = DOMAIN + bytes([VERSION_SEEN])
KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_ABSENT = b"\x00"
_PRESENT_LEDGER = struct.Struct(">Bqi")
"""`_ledger_part` of a PDLI with a ledger id, in one pack."""
_LEAF_HEAD = tree.LEAF_PREFIX + _PREFIX
_LEAF_HEAD_SEEN = tree.LEAF_PREFIX + _PREFIX_SEEN
_sha256 = hashlib.sha256


def _varint(value: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int (a tag or a field length)."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SIGNATURE_TAG = _varint(_pd.PendingDeleteLedgerInfo.SIGNATURE_FIELD_NUMBER << 3 | 2)
"""The `signature` field's tag: its number and wire type 2 (length-delimited)."""


def _string(value: str) -> bytes:
    raw = value.encode()
    return _U32.pack(len(raw)) + raw


def _optional_int64(present: bool, value: int) -> bytes:
    return b"\x01" + _I64.pack(value) if present else _ABSENT


def _ledger_part(pdli: _pd.PendingDeleteLedgerInfo) -> bytes:
    return _optional_int64(pdli.HasField("ledger_id"), pdli.ledger_id) + _I32.pack(pdli.ledger_type)


def _owner_part(pdli: _pd.PendingDeleteLedgerInfo) -> bytes:
    return b"".join(
        (
            _I32.pack(pdli.component),
            _string(pdli.topic_name),
            _string(pdli.managed_ledger_name),
            _string(pdli.cursor_name),
            _string(pdli.schema_id),
        )
    )


def _offload_part(pdli: _pd.PendingDeleteLedgerInfo) -> bytes:
    if not pdli.HasField("offload_context"):
        return _ABSENT
    ctx = pdli.offload_context
    entries = sorted((k.encode(), v.encode()) for k, v in ctx.driver_metadata.items())
    metadata = b"".join(_U32.pack(len(k)) + k + _U32.pack(len(v)) + v for k, v in entries)
    return b"".join(
        (
            b"\x01",
            _I64.pack(ctx.uuid_msb),
            _I64.pack(ctx.uuid_lsb),
            _string(ctx.driver_name),
            _U32.pack(len(entries)),
            metadata,
            bytes([ctx.complete, ctx.bookkeeper_deleted]),
            _I64.pack(ctx.timestamp_ms),
        )
    )


def _intent_part(pdli: _pd.PendingDeleteLedgerInfo) -> bytes:
    return b"".join(
        (
            _optional_int64(pdli.HasField("fence_token"), pdli.fence_token),
            _I64.pack(pdli.marked_at_ms),
            _I32.pack(pdli.source),
            _string(pdli.marker_id),
            _string(pdli.cluster),
            _string(pdli.request_id),
        )
    )


def canonical_bytes(pdli: _pd.PendingDeleteLedgerInfo) -> bytes:
    """The bytes a signature covers (the module docstring defines them)."""
    seen = pdli.seen_at_ms
    return b"".join(
        (
            _PREFIX_SEEN if seen else _PREFIX,
            _ledger_part(pdli),
            _owner_part(pdli),
            _offload_part(pdli),
            _intent_part(pdli),
            _seen_part(seen),
        )
    )


def _seen_part(seen: int) -> bytes:
    """Version 2's last field; nothing in version 1."""
    return _I64.pack(seen) if seen else b""


class CanonicalTemplate:
    """`canonical_bytes` for many PDLIs sharing every field but the ledger's own (id, type,
    offload context), with the shared parts encoded once (the marker's hot path)."""

    def __init__(self, shared: _pd.PendingDeleteLedgerInfo) -> None:
        self._owner = _owner_part(shared)
        self._intent = _intent_part(shared)
        self._tail_without_offload = self._owner + _ABSENT + self._intent
        """What follows the ledger part when there is no offload context (most PDLIs)."""
        self._seen = shared.seen_at_ms
        """`seen_at_ms` unless `own` sets its own (merged, the later encoding wins)."""

    def bytes_for(self, own: _pd.PendingDeleteLedgerInfo) -> bytes:
        """`canonical_bytes` of `shared` merged with `own`."""
        seen = own.seen_at_ms or self._seen
        prefix = _PREFIX_SEEN if seen else _PREFIX
        return b"".join((prefix, _own_ledger_part(own), self._tail(own), _seen_part(seen)))

    def leaf_hash(self, own: _pd.PendingDeleteLedgerInfo) -> bytes:
        """`signature_tree.leaf_hash(self.bytes_for(own))`, hashed from the parts at once."""
        seen = own.seen_at_ms or self._seen
        if not seen:
            return _sha256(b"".join((_LEAF_HEAD, _own_ledger_part(own), self._tail(own)))).digest()
        parts = (_LEAF_HEAD_SEEN, _own_ledger_part(own), self._tail(own), _I64.pack(seen))
        return _sha256(b"".join(parts)).digest()

    def _tail(self, own: _pd.PendingDeleteLedgerInfo) -> bytes:
        if not own.HasField("offload_context"):
            return self._tail_without_offload
        return b"".join((self._owner, _offload_part(own), self._intent))


def _own_ledger_part(own: _pd.PendingDeleteLedgerInfo) -> bytes:
    """`_ledger_part`, in one pack when the ledger id is set."""
    if own.HasField("ledger_id"):
        return _PRESENT_LEDGER.pack(1, own.ledger_id, own.ledger_type)
    return _ABSENT + _I32.pack(own.ledger_type)


def key_id_of(public_key: Ed25519PublicKey) -> str:
    """The default key id: the first 8 bytes of SHA-256 of the raw public key, in hex."""
    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def _raw_public(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def check_key_id(key_id: str) -> str:
    if not KEY_ID.match(key_id):
        raise ValueError(f"key id {key_id!r} must be 1-64 characters of A-Z a-z 0-9 . _ -")
    return key_id


class IntentSigner:
    """The marker's keyring: private keys by id, one of them active (the one that signs).

    PDLIs encoded together are signed together: one Ed25519 signature per batch of up to
    `signature_tree.MAX_LEAVES`, each PDLI carrying its own proof (`signature_tree`).
    Keeping retired keys lets an operator switch the active id back without a restart of
    the verifiers; only the active key ever signs.
    """

    def __init__(self, keys: Mapping[str, Ed25519PrivateKey], active: str) -> None:
        if active not in keys:
            raise ValueError(f"active key id {active!r} is not among {sorted(keys)}")
        self._keys = dict(keys)
        self.key_id = active
        self._key = keys[active]
        self._id_field = _pd.PendingDeleteLedgerInfo(signing_key_id=active).SerializeToString()

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    def signatures(self, canonicals: Sequence[bytes]) -> list[bytes]:
        """The `signature` field value of each PDLI, given its canonical bytes."""
        leaves = [tree.leaf_hash(c) for c in canonicals]
        return [
            tree.encode(signature, i, count, path)
            for signature, count, paths in self._batches(leaves)
            for i, path in enumerate(paths)
        ]

    def signature_fields(self, canonicals: Sequence[bytes]) -> list[bytes]:
        """The serialized `signing_key_id` and `signature` fields of each PDLI.

        Appended to a PDLI's serialization they parse as part of it (protobuf merges
        concatenated encodings, the last value of a field winning)."""
        return self.signature_fields_of_leaves([tree.leaf_hash(c) for c in canonicals])

    def signature_fields_of_leaves(self, leaves: Sequence[bytes]) -> list[bytes]:
        """`signature_fields`, given each PDLI's leaf hash (`CanonicalTemplate.leaf_hash`).

        The `signature` field is written here as protobuf writes a bytes field (its tag, the
        length as a varint, the bytes), saving a message object per PDLI."""
        fields: list[bytes] = []
        for signature, count, paths in self._batches(leaves):
            # Everything before the position, by path length (a batch has few lengths).
            heads: dict[int, bytes] = {}
            for i, path in enumerate(paths):
                head = heads.get(len(path))
                if head is None:
                    size = _varint(tree.HEADER + len(path))
                    head = heads[len(path)] = self._id_field + _SIGNATURE_TAG + size + signature
                fields.append(head + tree.encode_position(i, count) + path)
        return fields

    def _batches(self, leaves: Sequence[bytes]) -> Iterator[tuple[bytes, int, list[bytes]]]:
        """(Ed25519 signature, leaf count, sibling paths) of each batch of `MAX_LEAVES`."""
        for start in range(0, len(leaves), tree.MAX_LEAVES):
            chunk = leaves[start : start + tree.MAX_LEAVES]
            root, paths = tree.build(chunk)
            yield self._key.sign(tree.root_message(len(chunk), root)), len(chunk), paths

    def sign(self, *pdlis: _pd.PendingDeleteLedgerInfo) -> None:
        """Set each PDLI's key id and signature over its current fields (one batch)."""
        blobs = self.signatures([canonical_bytes(p) for p in pdlis])
        for pdli, blob in zip(pdlis, blobs, strict=True):
            pdli.signing_key_id = self.key_id
            pdli.signature = blob


class SignatureStatus(Enum):
    """What a PDLI's signature fields say, checked against the trusted keys."""

    VALID = "valid"
    UNSIGNED = "unsigned"
    """No key id and no signature."""
    UNKNOWN_KEY = "unknown_key"
    """A key id no trusted key has (a retired, foreign or made-up key)."""
    BAD_SIGNATURE = "bad_signature"
    """A trusted key id whose signature does not match the fields: tampered or forged."""


class TrustedKeys:
    """The verifier's public keys by id; any of them is accepted (rotation).

    Batch roots already verified are remembered (a bounded set), so the other PDLIs of a
    batch cost hashing only.
    """

    def __init__(
        self, keys: Mapping[str, Ed25519PublicKey] | None = None, *, remember: int = 65_536
    ) -> None:
        self._keys = dict(keys or {})
        self._verified: OrderedDict[tuple[str, bytes, bytes], None] = OrderedDict()
        self._remember = remember

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._keys))

    def __bool__(self) -> bool:
        return bool(self._keys)

    def check(self, pdli: _pd.PendingDeleteLedgerInfo) -> SignatureStatus:
        if not pdli.signing_key_id and not pdli.signature:
            return SignatureStatus.UNSIGNED
        key = self._keys.get(pdli.signing_key_id)
        if key is None:
            return SignatureStatus.UNKNOWN_KEY
        claimed = tree.root_of(tree.leaf_hash(canonical_bytes(pdli)), pdli.signature)
        if claimed is None:
            return SignatureStatus.BAD_SIGNATURE
        signature, message = claimed
        seen = (pdli.signing_key_id, message, signature)
        if seen in self._verified:
            self._verified.move_to_end(seen)
            return SignatureStatus.VALID
        try:
            key.verify(signature, message)
        except InvalidSignature:
            return SignatureStatus.BAD_SIGNATURE
        self._verified[seen] = None
        if len(self._verified) > self._remember:
            self._verified.popitem(last=False)
        return SignatureStatus.VALID
