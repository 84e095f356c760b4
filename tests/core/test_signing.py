"""Signed intents: the canonical encoding, signing, verification, rotation and key loading."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.cli import cli
from services.core.signing import (
    CanonicalTemplate,
    IntentSigner,
    SignatureStatus,
    TrustedKeys,
    canonical_bytes,
    key_id_of,
)
from services.core.signing_keys import (
    build_signer,
    generate_key_pair,
    load_public_key,
    parse_signing_keys,
    parse_trusted_keys,
    write_key_pair,
)
from services.systopic import IntentEncoder, decode_intent, encode_intent
from tombstone.v1 import pending_delete_pb2 as _pd

SEED = bytes(range(32))
KEY = Ed25519PrivateKey.from_private_bytes(SEED)


def vector_pdli() -> _pd.PendingDeleteLedgerInfo:
    context = _pd.OffloadContext(
        uuid_msb=1,
        uuid_lsb=-2,
        driver_name="S3",
        driver_metadata={"region": "r", "bucket": "b"},
        complete=True,
        timestamp_ms=5,
    )
    return _pd.PendingDeleteLedgerInfo(
        ledger_id=7,
        ledger_type=_pd.OFFLOAD_LEDGER,
        component=_pd.MANAGED_LEDGER,
        topic_name="persistent://t/n/a",
        managed_ledger_name="t/n/persistent/a",
        offload_context=context,
        fence_token=3,
        marked_at_ms=1000,
        not_before_ms=6000,
        source=_pd.BROKER,
        marker_id="m",
        cluster="c",
        request_id="r1",
    )


# The bytes of `vector_pdli()`, written out field by field from the spec in signing.py.
VECTOR = b"".join(
    [
        b"tombstone/pdli-signature\x00",
        b"\x01",  # version
        b"\x01" + (7).to_bytes(8, "big"),  # ledger_id present, 7
        (2).to_bytes(4, "big"),  # ledger_type OFFLOAD_LEDGER
        (1).to_bytes(4, "big"),  # component MANAGED_LEDGER
        (18).to_bytes(4, "big") + b"persistent://t/n/a",
        (16).to_bytes(4, "big") + b"t/n/persistent/a",
        (0).to_bytes(4, "big"),  # cursor_name ""
        (0).to_bytes(4, "big"),  # schema_id ""
        b"\x01",  # offload_context present
        (1).to_bytes(8, "big"),
        (-2).to_bytes(8, "big", signed=True),
        (2).to_bytes(4, "big") + b"S3",
        (2).to_bytes(4, "big"),  # two metadata entries, sorted by key
        (6).to_bytes(4, "big") + b"bucket" + (1).to_bytes(4, "big") + b"b",
        (6).to_bytes(4, "big") + b"region" + (1).to_bytes(4, "big") + b"r",
        b"\x01\x00",  # complete, not bookkeeper_deleted
        (5).to_bytes(8, "big"),
        b"\x01" + (3).to_bytes(8, "big"),  # fence_token present, 3
        (1000).to_bytes(8, "big"),  # marked_at_ms
        (1).to_bytes(4, "big"),  # source BROKER
        (1).to_bytes(4, "big") + b"m",
        (1).to_bytes(4, "big") + b"c",
        (2).to_bytes(4, "big") + b"r1",
    ]
)
VECTOR_SIGNATURE = bytes.fromhex(
    "64801a6fb4e5c07502b2928e0c33327cc3236c6d1e2c8ead726956ab3d3147f2"
    "9ed14653f122d387923ea44e2acf8642c609b042a7db5fbc49281d1a5207880c"
)
"""Ed25519 of the vector's batch root under the fixed seed (a batch of one: root = leaf)."""


def signer(key: Ed25519PrivateKey = KEY, key_id: str = "k1") -> IntentSigner:
    return IntentSigner({key_id: key}, key_id)


def trusting(*pairs: tuple[str, Ed25519PrivateKey]) -> TrustedKeys:
    return TrustedKeys({key_id: key.public_key() for key_id, key in pairs})


def signed(pdli: _pd.PendingDeleteLedgerInfo, by: IntentSigner) -> _pd.PendingDeleteLedgerInfo:
    copy = _pd.PendingDeleteLedgerInfo()
    copy.CopyFrom(pdli)
    by.sign(copy)
    return copy


def test_canonical_encoding_matches_the_fixed_vector() -> None:
    """The encoding is ours and stable: a change here breaks every deployed verifier."""
    assert canonical_bytes(vector_pdli()) == VECTOR


def test_signature_of_the_vector_is_fixed() -> None:
    """Ed25519 is deterministic: the vector's signature field under the fixed seed never
    changes. Alone in its batch, it is the signature of the root message (the leaf hash)
    followed by index 0 and count 1, with no sibling."""
    pdli = signed(vector_pdli(), signer())
    root = hashlib.sha256(b"\x00" + VECTOR).digest()
    message = b"tombstone/pdli-batch\x00\x01" + (1).to_bytes(4, "big") + root
    KEY.public_key().verify(VECTOR_SIGNATURE, message)
    expected = VECTOR_SIGNATURE + (0).to_bytes(4, "big") + (1).to_bytes(4, "big")
    assert ("k1", expected) == (pdli.signing_key_id, pdli.signature)
    assert key_id_of(KEY.public_key()) == "56475aa75463474c"


def test_encoding_ignores_protobuf_serialization_order() -> None:
    """Map insertion order (and so the protobuf bytes) does not change the signed bytes."""
    other = vector_pdli()
    other.offload_context.driver_metadata.clear()
    other.offload_context.driver_metadata["region"] = "r"
    other.offload_context.driver_metadata["bucket"] = "b"
    assert canonical_bytes(vector_pdli()) == canonical_bytes(other)


def test_absent_and_zero_optional_fields_differ() -> None:
    """ledger_id 0 and no ledger_id sign differently (0 is a valid ledger id)."""
    zero, absent = vector_pdli(), vector_pdli()
    zero.ledger_id = 0
    absent.ClearField("ledger_id")
    assert canonical_bytes(zero) != canonical_bytes(absent)


def test_a_signed_pdli_verifies() -> None:
    pdli = signed(vector_pdli(), signer())
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.VALID


def test_unsigned_pdli_is_unsigned() -> None:
    assert trusting(("k1", KEY)).check(vector_pdli()) == SignatureStatus.UNSIGNED


def test_unknown_key_id_is_rejected() -> None:
    """A key id the verifier does not hold, even with a signature valid under that key."""
    stranger = Ed25519PrivateKey.generate()
    pdli = signed(vector_pdli(), signer(stranger, "k9"))
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.UNKNOWN_KEY


def test_a_key_signing_under_a_trusted_id_is_rejected() -> None:
    """An attacker's key claiming a trusted key id gives a bad signature."""
    stranger = Ed25519PrivateKey.generate()
    pdli = signed(vector_pdli(), signer(stranger, "k1"))
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.BAD_SIGNATURE


def test_rotation_old_key_still_trusted() -> None:
    """The marker switched to a new key; PDLIs signed by the old one still verify."""
    new = Ed25519PrivateKey.generate()
    ring = IntentSigner({"old": KEY, "new": new}, "new")
    trusted = trusting(("old", KEY), ("new", new))
    assert signed(vector_pdli(), ring).signing_key_id == "new"
    old = signed(vector_pdli(), signer(KEY, "old"))
    assert [
        trusted.check(old),
        trusted.check(signed(vector_pdli(), ring)),
    ] == [SignatureStatus.VALID] * 2


# Every signed field, changed to another valid value.
TAMPERS = {
    "ledger_id": lambda p: setattr(p, "ledger_id", 8),
    "ledger_id absent": lambda p: p.ClearField("ledger_id"),
    "ledger_type": lambda p: setattr(p, "ledger_type", _pd.LEDGER),
    "component": lambda p: setattr(p, "component", _pd.MANAGED_CURSOR),
    "topic_name": lambda p: setattr(p, "topic_name", "persistent://t/n/b"),
    "managed_ledger_name": lambda p: setattr(p, "managed_ledger_name", "t/n/persistent/b"),
    "cursor_name": lambda p: setattr(p, "cursor_name", "sub"),
    "schema_id": lambda p: setattr(p, "schema_id", "t/n/a"),
    "offload_context": lambda p: p.ClearField("offload_context"),
    "offload_context.uuid_msb": lambda p: setattr(p.offload_context, "uuid_msb", 9),
    "offload_context.uuid_lsb": lambda p: setattr(p.offload_context, "uuid_lsb", 9),
    "offload_context.driver_name": lambda p: setattr(p.offload_context, "driver_name", "aws-s3"),
    "offload_context.driver_metadata": lambda p: p.offload_context.driver_metadata.update(
        {"bucket": "other"}
    ),
    "offload_context.driver_metadata added": lambda p: p.offload_context.driver_metadata.update(
        {"serviceEndpoint": "x"}
    ),
    "offload_context.complete": lambda p: setattr(p.offload_context, "complete", False),
    "offload_context.bookkeeper_deleted": lambda p: setattr(
        p.offload_context, "bookkeeper_deleted", True
    ),
    "offload_context.timestamp_ms": lambda p: setattr(p.offload_context, "timestamp_ms", 6),
    "fence_token": lambda p: setattr(p, "fence_token", 4),
    "fence_token absent": lambda p: p.ClearField("fence_token"),
    "marked_at_ms": lambda p: setattr(p, "marked_at_ms", 1001),
    "source": lambda p: setattr(p, "source", _pd.OBSERVED),
    "marker_id": lambda p: setattr(p, "marker_id", "n"),
    "cluster": lambda p: setattr(p, "cluster", "d"),
    "request_id": lambda p: setattr(p, "request_id", "r2"),
    "seen_at_ms": lambda p: setattr(p, "seen_at_ms", 999),
}


def test_every_field_is_covered() -> None:
    """The tamper list names every PDLI and offload-context field but the unsigned ones."""
    unsigned = {"not_before_ms", "signing_key_id", "signature"}
    fields = {f.name for f in _pd.PendingDeleteLedgerInfo.DESCRIPTOR.fields} - unsigned
    context = {f"offload_context.{f.name}" for f in _pd.OffloadContext.DESCRIPTOR.fields}
    assert fields | context <= set(TAMPERS)


@pytest.mark.parametrize("field", sorted(TAMPERS))
def test_tampered_field_is_a_bad_signature(field: str) -> None:
    """Changing any signed field after signing breaks the signature."""
    pdli = signed(vector_pdli(), signer())
    TAMPERS[field](pdli)
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.BAD_SIGNATURE


def test_not_before_change_keeps_the_signature_valid() -> None:
    """The retry path and the DLQ replay rewrite not_before_ms: still valid."""
    pdli = signed(vector_pdli(), signer())
    pdli.not_before_ms = 99_999
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.VALID


def test_truncated_signature_is_bad() -> None:
    pdli = signed(vector_pdli(), signer())
    pdli.signature = pdli.signature[:10]
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.BAD_SIGNATURE


def split_pdli(
    full: _pd.PendingDeleteLedgerInfo,
) -> tuple[_pd.PendingDeleteLedgerInfo, _pd.PendingDeleteLedgerInfo]:
    """`full` as the marker's encoder takes it: the call's shared fields and the ledger's own."""
    own = _pd.PendingDeleteLedgerInfo(
        ledger_id=full.ledger_id, ledger_type=full.ledger_type, offload_context=full.offload_context
    )
    shared = _pd.PendingDeleteLedgerInfo()
    shared.CopyFrom(full)
    for name in ("ledger_id", "ledger_type", "offload_context"):
        shared.ClearField(name)
    return shared, own


def test_encoders_sign_exactly_as_sign_does() -> None:
    """`encode_intent` and `IntentEncoder` (shared fields encoded once) give payloads whose
    signature is the one `IntentSigner.sign` computes for the full PDLI."""
    full = vector_pdli()
    shared, own = split_pdli(full)
    expected = signed(full, signer())
    by_encoder = decode_intent(IntentEncoder(shared, signer()).encode(own).payload)
    by_function = decode_intent(encode_intent(full, signer()).payload)
    assert expected == by_encoder == by_function
    assert canonical_bytes(full) == CanonicalTemplate(shared).bytes_for(own)


def seen_pdli(seen: int = 900) -> _pd.PendingDeleteLedgerInfo:
    pdli = vector_pdli()
    pdli.seen_at_ms = seen
    return pdli


def test_a_pdli_without_seen_at_encodes_as_version_1() -> None:
    """`seen_at_ms` 0 (unset) adds nothing: every PDLI sent before the field existed, and
    every one sent without it, signs exactly as before."""
    assert canonical_bytes(seen_pdli(0)) == VECTOR


def test_seen_at_is_version_2_with_the_stamp_last() -> None:
    """A set `seen_at_ms` makes the encoding version 2: version 1's fields, then the stamp."""
    expected = b"tombstone/pdli-signature\x00\x02" + VECTOR[26:] + (900).to_bytes(8, "big")
    assert canonical_bytes(seen_pdli()) == expected


SEEN_TAMPERS: dict[str, Callable[[_pd.PendingDeleteLedgerInfo], None]] = {
    "seen_at_ms changed": lambda p: setattr(p, "seen_at_ms", 901),
    "seen_at_ms cleared": lambda p: p.ClearField("seen_at_ms"),
    "seen_at_ms negative": lambda p: setattr(p, "seen_at_ms", -900),
    "marked_at_ms": lambda p: setattr(p, "marked_at_ms", 1001),
}


@pytest.mark.parametrize("tamper", sorted(SEEN_TAMPERS))
def test_seen_at_is_covered_by_the_signature(tamper: str) -> None:
    """A PDLI signed with `seen_at_ms` verifies; changing or removing the stamp (or any
    other signed field beside it) breaks the signature."""
    pdli = signed(seen_pdli(), signer())
    trusted = trusting(("k1", KEY))
    assert trusted.check(pdli) == SignatureStatus.VALID
    SEEN_TAMPERS[tamper](pdli)
    assert trusted.check(pdli) == SignatureStatus.BAD_SIGNATURE


def test_adding_seen_at_to_a_signed_pdli_breaks_it() -> None:
    """A stamp added after signing (a forger moving the incarnation bound) is not covered."""
    pdli = signed(vector_pdli(), signer())
    pdli.seen_at_ms = 1
    assert trusting(("k1", KEY)).check(pdli) == SignatureStatus.BAD_SIGNATURE


@pytest.mark.parametrize("where", ["shared", "own"])
def test_encoders_sign_seen_at_as_sign_does(where: str) -> None:
    """With `seen_at_ms` in the shared part (the follower's change, the reconciler's call) or
    in the ledger's own part, the encoder's payload carries the signature `sign` computes."""
    full = seen_pdli()
    shared, own = split_pdli(full)
    if where == "own":
        shared.ClearField("seen_at_ms")
        own.seen_at_ms = full.seen_at_ms
    expected = signed(full, signer())
    by_encoder = decode_intent(IntentEncoder(shared, signer()).encode(own).payload)
    assert expected == by_encoder
    assert trusting(("k1", KEY)).check(by_encoder) == SignatureStatus.VALID
    assert canonical_bytes(full) == CanonicalTemplate(shared).bytes_for(own)


def test_re_signing_replaces_the_old_signature() -> None:
    """A copy re-encoded with the signer carries only the new signature's values."""
    old = signed(vector_pdli(), signer(Ed25519PrivateKey.generate(), "k0"))
    again = decode_intent(encode_intent(old, signer()).payload)
    expected = signed(vector_pdli(), signer())
    assert (expected.signing_key_id, expected.signature) == (again.signing_key_id, again.signature)


def test_keys_from_files_and_inline(tmp_path: Path) -> None:
    """PEM files, raw base64 files and inline base64 load; ids default to the fingerprint."""
    pair = generate_key_pair()
    private, public = write_key_pair(tmp_path, pair)
    seed_file = tmp_path / "seed.b64"
    seed_file.write_text(base64.b64encode(SEED).decode() + "\n")
    keys = parse_signing_keys(f"{private}, named={seed_file}")
    assert {pair.key_id, "named"} == set(keys)
    raw_public = base64.b64encode(load_public_key(str(public)).public_bytes_raw()).decode()
    trusted = parse_trusted_keys(f"{public},x=base64:{raw_public}")
    assert (pair.key_id, "x") == trusted.key_ids
    assert private.stat().st_mode & 0o777 == 0o600


def test_verifier_refuses_a_private_key(tmp_path: Path) -> None:
    """The verifier is given public keys only: a private key file is a configuration error."""
    private, _ = write_key_pair(tmp_path, generate_key_pair())
    with pytest.raises(ValueError, match="private key"):
        parse_trusted_keys(str(private))


def test_active_key_must_be_named_among_several() -> None:
    keys = {"a": KEY, "b": Ed25519PrivateKey.generate()}
    with pytest.raises(ValueError, match="name the active"):
        build_signer(keys, "")
    with pytest.raises(ValueError, match="not among"):
        build_signer(keys, "c")
    only = build_signer({"a": KEY}, "")
    assert only is not None
    assert only.key_id == "a"
    assert build_signer({}, "") is None


def test_cli_generates_a_usable_pair(tmp_path: Path) -> None:
    """`tombstone keys generate` writes a pair the marker and the verifier load."""
    result = CliRunner().invoke(cli, ["keys", "generate", "--out", str(tmp_path), "--name", "k7"])
    assert result.exit_code == 0, result.output
    ring = build_signer(parse_signing_keys(f"k7={tmp_path / 'k7.key'}"), "k7")
    assert ring is not None
    trusted = parse_trusted_keys(f"k7={tmp_path / 'k7.pub'}")
    assert trusted.check(signed(vector_pdli(), ring)) == SignatureStatus.VALID
    again = CliRunner().invoke(cli, ["keys", "generate", "--out", str(tmp_path), "--name", "k7"])
    assert again.exit_code != 0  # never overwrites a key


def many(count: int) -> list[_pd.PendingDeleteLedgerInfo]:
    pdlis = []
    for i in range(count):
        pdli = vector_pdli()
        pdli.ledger_id = 100 + i
        pdlis.append(pdli)
    return pdlis


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 9, 63, 64, 65, 130])
def test_every_pdli_of_a_batch_verifies_alone(count: int) -> None:
    """PDLIs signed together each carry a proof that verifies on its own, by a fresh
    verifier (no remembered root), at every batch size and across batch boundaries."""
    pdlis = many(count)
    signer().sign(*pdlis)
    assert [SignatureStatus.VALID] * count == [trusting(("k1", KEY)).check(p) for p in pdlis]


def test_a_proof_moved_to_another_pdli_of_the_batch_is_bad() -> None:
    """Swapping signature fields within a batch, or changing the index or the count, fails."""
    pdlis = many(5)
    signer().sign(*pdlis)
    trusted = trusting(("k1", KEY))
    assert [trusted.check(p) for p in pdlis] == [SignatureStatus.VALID] * 5
    first, second = pdlis[0].signature, pdlis[1].signature
    pdlis[0].signature, pdlis[1].signature = second, first
    index = bytearray(pdlis[2].signature)
    index[67] ^= 1  # index 2 -> 3
    pdlis[2].signature = bytes(index)
    count = bytearray(pdlis[3].signature)
    count[71] = 4  # count 5 -> 4
    pdlis[3].signature = bytes(count)
    assert [trusted.check(p) for p in pdlis[:4]] == [SignatureStatus.BAD_SIGNATURE] * 4


def test_a_tampered_pdli_fails_even_after_its_batch_root_was_verified() -> None:
    """The remembered root speeds up the batch's other PDLIs; it never vouches for a PDLI
    whose own fields changed."""
    pdlis = many(4)
    signer().sign(*pdlis)
    trusted = trusting(("k1", KEY))
    assert trusted.check(pdlis[0]) == SignatureStatus.VALID
    pdlis[1].marked_at_ms += 1
    assert [
        trusted.check(pdlis[1]),
        trusted.check(pdlis[2]),
    ] == [SignatureStatus.BAD_SIGNATURE, SignatureStatus.VALID]
