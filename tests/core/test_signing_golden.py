"""Golden vectors of the signing output: a speed change must not move a byte.

The digests below were computed from the encoders as they were before the signing path was
made faster (one Ed25519 signature per batch of up to 64, `signature_tree`). Ed25519 is
deterministic, so with the fixed seed every payload, proof and signature is fixed: any
change to what is signed, to the tree's shape or to the field layout changes a digest. A
plain re-statement of the spec (leaf and node hashes, the signed message) checks the same
batches independently of the code under test, and every payload verifies alone.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core import signature_tree as tree
from services.core.signing import _SIGNATURE_TAG as _signature_tag
from services.core.signing import (
    CanonicalTemplate,
    IntentSigner,
    SignatureStatus,
    TrustedKeys,
    _varint,
    canonical_bytes,
)
from services.systopic import IntentEncoder, OutgoingMessage, decode_intent, encode_intents
from tombstone.v1 import pending_delete_pb2 as _pd

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
SIZES = (1, 2, 3, 5, 8, 33, 63, 64, 65, 100, 129, 200)


def shared() -> _pd.PendingDeleteLedgerInfo:
    """The fields a Mark call's PDLIs share (`planning.shared_fields` of an ML owner)."""
    return _pd.PendingDeleteLedgerInfo(
        component=_pd.MANAGED_LEDGER,
        topic_name="persistent://public/default/orders",
        managed_ledger_name="public/default/persistent/orders",
        fence_token=8,
        marked_at_ms=1_700_000_000_000,
        not_before_ms=1_700_000_005_000,
        source=_pd.BROKER,
        marker_id="marker-1",
        cluster="tombstone",
        request_id="5f0e" * 8,
    )


def own(i: int, *, mixed: bool = True) -> _pd.PendingDeleteLedgerInfo:
    """Ledger `i`'s own fields; when `mixed`, every third one offloaded (with a context)."""
    if not mixed or i % 3 != 2:
        return _pd.PendingDeleteLedgerInfo(ledger_id=1_000_000 + i, ledger_type=_pd.LEDGER)
    context = _pd.OffloadContext(
        uuid_msb=i,
        uuid_lsb=-i,
        driver_name="aws-s3",
        driver_metadata={"bucket": f"b{i}", "region": "eu-west-1", "ümlaut": "✓"},
        complete=True,
        bookkeeper_deleted=i % 2 == 0,
        timestamp_ms=1_600_000_000_000 + i,
    )
    return _pd.PendingDeleteLedgerInfo(
        ledger_id=1_000_000 + i, ledger_type=_pd.OFFLOAD_LEDGER, offload_context=context
    )


def full(i: int) -> _pd.PendingDeleteLedgerInfo:
    pdli = shared()
    pdli.MergeFrom(own(i))
    return pdli


def digest(messages: Iterable[OutgoingMessage], *, raw: bool) -> str:
    """SHA-256 over every message's payload, key and properties, each length-prefixed.

    With `raw` the payload's own bytes; otherwise its deterministic re-serialization: the
    protobuf encoder writes a map (an offload context's driver metadata) in an order that
    changes between processes. The signature never depends on it (the canonical encoding
    sorts the map), and it is among the re-serialized bytes."""
    h = hashlib.sha256()
    for m in messages:
        payload = m.payload
        if not raw:
            payload = decode_intent(payload).SerializeToString(deterministic=True)
        for part in (
            payload,
            m.partition_key.encode(),
            repr(sorted(m.properties.items())).encode(),
        ):
            h.update(struct.pack(">I", len(part)) + part)
    return h.hexdigest()


def signer() -> IntentSigner:
    return IntentSigner({"k1": KEY}, "k1")


GOLDEN_PLAIN = {
    1: "f3e802c6e8eca5434830d4b9de6dac2c524aaf0a079522e7d2d5ff3e26f3095b",
    2: "95b1e684c5bb6fcb6bb852d1108bd8fdf3692c4e0c4ddf42be1d1aeae860be29",
    3: "6a99c58029e4836afb570cc4bae89114d6d9d4044117723f6529bbac2f0740e7",
    5: "e56354d99d98f0d4849277c8cb6a1a9c3ba68041f1c9088aa583c3fafc057462",
    8: "b2bfbefd8aa3a127d81a8079c1a4d31f2fe82a1f9abe66e1b066fb1e6cf27476",
    33: "b1ac065640a7eeb570e52b797739cfc3dab53450a1974cbc180be77921aa6100",
    63: "a221684c7b32646d2577bebd7f98839f9be8026889666d5392c29019ab451679",
    64: "7e971d874aea5eefb3e6db28c2f8c145ce6ed981bac1acba6dbeba4d4c742013",
    65: "ee774e17c798a16d552190fd89cc3aa72a151983a509c563a9ec2c3af22591b6",
    100: "597392797552123e480458b5fd004f77b428dd6aae7bbf523f3b5dcd2c317338",
    129: "8eb32e83f85e462313643c98a3aaf700e691f1a2fc2d5c74c12ff0cdc60c17b4",
    200: "e7220c823d88907c145a7625a414996da140a789d61f285543a20b3443dbe1ca",
}
"""`IntentEncoder.encode_many` of `n` BookKeeper-tier PDLIs (the marker's path): raw bytes."""
GOLDEN_MIXED = {
    1: "c23f17a7d2c8ca9237eff5994ee5e539dcfb02a5ec9a9c8079dc4ad16447449d",
    2: "d23cd305d556aea230d3e211a5cfe2395186208c36a90de2ce1138f142a558dc",
    3: "33936364c1ee1832c2d6f5ee57692a89d50a6750f28f256618471198a226afcd",
    5: "6256baaeb6e6c68666bf9b35ad61b111886fb3037af174c22182274f5093c1c0",
    8: "40c32b41cb26051f12d42455736ff9a4b69359a48e449fc6dacb0e2d05a4a364",
    33: "e5d165324dad3c41cc0b64a9ee188ef3ec4c4ff5ff44f5e0ab6f196ce43ebbc6",
    63: "9ba3897ad8a75f19c510085f631ae3c53fa2ad931e34531b6cd92d50732cecc7",
    64: "3bcdb4f52454fd2178b1a2998dbcd91129050b7ff9ffd01cae528b44fc4b5a89",
    65: "3d44f5e87aa1d511809ec91347c3f8689231788069944db917bc03f3518d895f",
    100: "c79a730a3e598d74ccc5f44aacf46313efa6aed23de5be5cc172f44688265e9e",
    129: "c0c3a7edb7dc6c18b0f2d91833ad7570560cd51b0d32d74b2184bf6f65daba40",
    200: "f01e94da22eef214490bbfc5da10f3fa48f2bf68ac92f4c187573a0cfa4d3dc6",
}
"""The same with every third PDLI offloaded (payloads re-serialized deterministically)."""


def encoder_messages(n: int, *, mixed: bool) -> list[OutgoingMessage]:
    owns = [own(i, mixed=mixed) for i in range(n)]
    return IntentEncoder(shared(), signer()).encode_many(owns)


@pytest.mark.parametrize("n", SIZES)
def test_the_marker_encoder_output_is_unchanged(n: int) -> None:
    assert digest(encoder_messages(n, mixed=False), raw=True) == GOLDEN_PLAIN[n]
    assert digest(encoder_messages(n, mixed=True), raw=False) == GOLDEN_MIXED[n]


@pytest.mark.parametrize("n", SIZES)
def test_the_re_send_encoder_output_is_unchanged(n: int) -> None:
    messages = encode_intents([full(i) for i in range(n)], signer())
    # The late re-send path (`encode_intents` of the full PDLIs) re-creates exactly the
    # PDLIs and signatures the marker's encoder sent.
    assert digest(messages, raw=False) == GOLDEN_MIXED[n]
    # Another protobuf field order than the marker's encoder; the same PDLIs and proofs.
    assert [decode_intent(m.payload) for m in messages] == [
        decode_intent(m.payload) for m in encoder_messages(n, mixed=True)
    ]


def test_canonical_template_matches_the_full_encoding() -> None:
    template = CanonicalTemplate(shared())
    for i in range(6):
        assert template.bytes_for(own(i)) == canonical_bytes(full(i))


def _spec_root(leaves: list[bytes]) -> bytes:
    """The tree of signature_tree's docstring, level by level: an odd last node goes up."""
    level = [hashlib.sha256(b"\x00" + leaf).digest() for leaf in leaves]
    while len(level) > 1:
        pairs = [level[i : i + 2] for i in range(0, len(level), 2)]
        level = [
            hashlib.sha256(b"\x01" + p[0] + p[1]).digest() if len(p) == 2 else p[0] for p in pairs
        ]
    return level[0]


@pytest.mark.parametrize("n", SIZES)
def test_signatures_are_the_spec_signatures(n: int) -> None:
    """Each batch of 64 is signed over the spec's root message, with the spec's index and
    count, and every PDLI verifies alone with a fresh verifier."""
    messages = encoder_messages(n, mixed=True)
    pdlis = [decode_intent(m.payload) for m in messages]
    for start in range(0, n, 64):
        batch = pdlis[start : start + 64]
        count = len(batch)
        root = _spec_root([canonical_bytes(p) for p in batch])
        signed = b"tombstone/pdli-batch\x00\x01" + struct.pack(">I", count) + root
        for index, pdli in enumerate(batch):
            assert pdli.signing_key_id == "k1"
            KEY.public_key().verify(pdli.signature[:64], signed)
            assert pdli.signature[64:72] == struct.pack(">II", index, count)
    fresh = [TrustedKeys({"k1": KEY.public_key()}).check(p) for p in pdlis]
    assert fresh == [SignatureStatus.VALID] * n


def test_signature_fields_are_protobuf_s_own_serialization() -> None:
    """The field written by hand (tag, varint length, bytes) is what protobuf writes, for
    every path length a verifier accepts (up to 4096 leaves: 12 siblings)."""
    ring = signer()
    for count in (1, 2, 3, 64, 65, 130):
        canonicals = [bytes([i % 256, i // 256]) for i in range(count)]
        blobs = ring.signatures(canonicals)
        leaves = [tree.leaf_hash(c) for c in canonicals]
        fields = ring.signature_fields_of_leaves(leaves)
        assert [
            _pd.PendingDeleteLedgerInfo(signing_key_id="k1").SerializeToString()
            + _pd.PendingDeleteLedgerInfo(signature=blob).SerializeToString()
            for blob in blobs
        ] == fields
    for size in range(72, 72 + 32 * 13, 32):
        blob = bytes(size)
        expected = _pd.PendingDeleteLedgerInfo(signature=blob).SerializeToString()
        assert expected == _signature_tag + _varint(size) + blob
