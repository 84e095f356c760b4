"""Writes the format fixtures of a release: `python -m tests.compat.release_fixtures <dir>`.

Each release runs this once into `tests/fixtures/release-<n>/` and commits the files; the
directories of earlier releases are kept as they are. `test_release_formats` then proves that
the current decoders still read what every earlier release wrote (docs/upgrade.md).

Everything here is fixed (values, the signing key's seed), so the fixtures are reproducible,
but they are never regenerated in place: an old release's bytes are evidence, not output.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.signing import IntentSigner, key_id_of
from services.marker.follower.checkpoint import Pointer, compress
from services.marker.follower.index import OwnerIndex, encode
from services.marker.follower.owner_paths import Kind
from services.metadata import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    Versioned,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)
from services.systopic.messages import encode_intent, encode_intents
from tombstone.v1 import pending_delete_pb2 as _pd

SEED = bytes(range(32))
"""The fixtures' signing key: a test key, public by design."""
ML_NAME = "public/default/persistent/orders"
ML_PATH = f"/managed-ledgers/{ML_NAME}"
CURSOR_PATH = f"{ML_PATH}/sub-1"
SCHEMA_PATH = "/schemas/public/default/orders"
UID_MSB, UID_LSB = 0x6F1C1D8E4B1F4E0A, -0x65AAFEDCBA987655
MARKED_AT = 1_700_000_000_000


def pdlis() -> dict[str, _pd.PendingDeleteLedgerInfo]:
    """One PDLI of each kind, as the marker, the follower and the reconciler send them."""
    shared = _pd.PendingDeleteLedgerInfo(
        topic_name="persistent://public/default/orders",
        marked_at_ms=MARKED_AT,
        not_before_ms=MARKED_AT + 5_000,
        marker_id="marker-1",
        cluster="tombstone",
    )
    own = {
        "ledger": _pd.PendingDeleteLedgerInfo(
            ledger_id=101,
            ledger_type=_pd.LEDGER,
            component=_pd.MANAGED_LEDGER,
            managed_ledger_name=ML_NAME,
            fence_token=8,
            source=_pd.BROKER,
            request_id="req-0001",
        ),
        "offload": _pd.PendingDeleteLedgerInfo(
            ledger_id=102,
            ledger_type=_pd.OFFLOAD_LEDGER,
            component=_pd.MANAGED_LEDGER,
            managed_ledger_name=ML_NAME,
            fence_token=8,
            source=_pd.BROKER,
            request_id="req-0001",
            offload_context=_pd.OffloadContext(
                uuid_msb=UID_MSB,
                uuid_lsb=UID_LSB,
                driver_name="aws-s3",
                driver_metadata={"bucket": "offload-bucket"},
                complete=True,
                timestamp_ms=MARKED_AT - 60_000,
            ),
        ),
        "cursor": _pd.PendingDeleteLedgerInfo(
            ledger_id=103,
            ledger_type=_pd.LEDGER,
            component=_pd.MANAGED_CURSOR,
            managed_ledger_name=ML_NAME,
            cursor_name="sub-1",
            fence_token=3,
            source=_pd.OBSERVED,
        ),
        "schema": _pd.PendingDeleteLedgerInfo(
            ledger_id=104,
            ledger_type=_pd.LEDGER,
            component=_pd.SCHEMA_STORAGE,
            schema_id="public/default/orders",
            fence_token=5,
            source=_pd.RECONCILER,
        ),
    }
    return {kind: _merged(shared, fields) for kind, fields in own.items()}


def _merged(
    shared: _pd.PendingDeleteLedgerInfo, own: _pd.PendingDeleteLedgerInfo
) -> _pd.PendingDeleteLedgerInfo:
    pdli = _pd.PendingDeleteLedgerInfo()
    pdli.CopyFrom(shared)
    pdli.MergeFrom(own)
    return pdli


def owner_index() -> OwnerIndex:
    """The follower's index of one topic: its ML (a plain ledger, an offloaded one, a third),
    a cursor and the schema."""
    index = OwnerIndex()
    plain = LedgerInfo(ledgerId=101, entries=10, size=1000, timestamp=MARKED_AT)
    offloaded = LedgerInfo(ledgerId=102, entries=10, size=1000, timestamp=MARKED_AT)
    ctx = offloaded.offloadContext
    ctx.uidMsb, ctx.uidLsb, ctx.complete, ctx.timestamp = UID_MSB, UID_LSB, True, MARKED_AT
    ctx.driverMetadata.name = "aws-s3"
    prop = ctx.driverMetadata.properties.add()
    prop.key, prop.value = "bucket", "offload-bucket"
    last = LedgerInfo(ledgerId=105, entries=10, size=1000, timestamp=MARKED_AT)
    ml = ManagedLedgerInfo()
    ml.ledgerInfo.extend([plain, offloaded, last])
    cursor = ManagedCursorInfo(cursorsLedgerId=103, markDeleteLedgerId=105, markDeleteEntryId=7)
    schema = SchemaLocator()
    for version, ledger_id in enumerate((104, 106)):
        entry = schema.index.add()
        entry.version = version
        entry.position.ledgerId, entry.position.entryId = ledger_id, 0
        entry.hash = b"h%d" % version
    schema.info.CopyFrom(schema.index[-1])
    for kind, path, data, version, czxid in (
        (Kind.ML, ML_PATH, encode_managed_ledger_info(ml), 7, 42),
        (Kind.CURSOR, CURSOR_PATH, encode_cursor_info(cursor), 2, 43),
        (Kind.SCHEMA, SCHEMA_PATH, encode_schema_locator(schema), 4, 44),
    ):
        node = Versioned(data, version, MARKED_AT, MARKED_AT, czxid, czxid + 100)
        index.put(path, encode(kind, node, path, index.drivers))
    return index


def write(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.from_private_bytes(SEED)
    public = key.public_key()
    (directory / "marker.pub").write_bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    signer = IntentSigner({key_id_of(public): key}, key_id_of(public))
    intents = pdlis()
    properties: dict[str, dict[str, str]] = {}
    unsigned = {kind: encode_intent(pdli) for kind, pdli in intents.items()}
    # Signed together, as the marker signs a batch: one signature, a proof per PDLI.
    signed = dict(zip(intents, encode_intents(list(intents.values()), signer), strict=True))
    for variant, messages in (("unsigned", unsigned), ("signed", signed)):
        for kind, message in messages.items():
            name = f"pdli-{kind}-{variant}.bin"
            (directory / name).write_bytes(message.payload)
            properties[name] = dict(message.properties)
    (directory / "pdli-properties.json").write_text(
        json.dumps(properties, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    index = owner_index()
    blob = compress(index)
    # The pointer exactly as `CheckpointStore.save` writes it; the blob is its one chunk.
    pointer = Pointer(
        generation=MARKED_AT * 1_000_000,
        chunks=1,
        size=len(blob),
        sha256=hashlib.sha256(blob).hexdigest(),
        written_ms=MARKED_AT,
        owners=len(index),
        references=index.ledger_count(),
    )
    (directory / "follower-checkpoint-chunk-0.bin").write_bytes(blob)
    (directory / "follower-checkpoint-pointer.json").write_bytes(
        json.dumps(pointer.__dict__).encode()
    )


if __name__ == "__main__":
    write(Path(sys.argv[1]))
