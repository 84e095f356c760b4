"""Offloaded objects as Pulsar wrote them before 2.10, for the verifier's and e2e tests.

Before PR #14907 (Pulsar 2.10), `BlobStoreManagedLedgerOffloader` set only the version keys
(`addVersionInfo`: `s3managedledgeroffloaderformatversion`, `...softwareversion`,
`...softwaregitsha`) as user metadata: no `ManagedLedgerName`, `pulsarclustername` or
`role`. The index object is still `OffloadIndexBlockImpl.toStream`: magic 0xDE47DE47, the
lengths, then the ledger's raw `LedgerMetadataFormat` (`OffloadUtils.buildLedgerMetadataFormat`,
carrying its custom metadata), then the entry index.
"""

from __future__ import annotations

from typing import Any

from services.metadata.ledger_metadata import (
    LedgerMetadata,
    LedgerState,
    Segment,
    encode_raw_ledger_metadata,
)
from services.metadata.offload import build_index_block, data_object_key, index_object_key

VERSION_KEYS = {
    "s3managedledgeroffloaderformatversion": "1",
    "s3managedledgeroffloadersoftwareversion": "2.9.3",
    "s3managedledgeroffloadersoftwaregitsha": "0123abcd",
}


def index_body(ledger_id: int, ml_name: str | None) -> bytes:
    """An index object whose segment metadata names `ml_name` (None: a ledger created before
    Pulsar 2.2, without custom metadata)."""
    custom = (
        {}
        if ml_name is None
        else {
            "application": b"pulsar",
            "component": b"managed-ledger",
            "pulsar/managed-ledger": ml_name.encode(),
        }
    )
    metadata = LedgerMetadata(
        ledger_id=ledger_id,
        ensemble_size=2,
        write_quorum=2,
        ack_quorum=2,
        state=LedgerState.CLOSED,
        length=1000,
        last_entry_id=9,
        segments=(Segment(0, ("bookie-1:3181", "bookie-2:3181")),),
        custom_metadata=custom,
    )
    return build_index_block(
        segment_metadata=encode_raw_ledger_metadata(metadata),
        entries=[(0, 1, 128)],
        data_object_length=1128,
    )


async def put_pre_210_objects(
    s3: Any,
    *,
    bucket: str,
    uuid: str,
    ledger_id: int,
    index_names: str | None,
    index: bool = True,
    index_data: bytes | None = None,
) -> tuple[str, str]:
    """The data object and (unless `index=False`) the index object, with version keys only."""
    keys = (data_object_key(uuid, ledger_id), index_object_key(uuid, ledger_id))
    await s3.put_object(Bucket=bucket, Key=keys[0], Body=b"\xfb" * 128, Metadata=VERSION_KEYS)
    if index:
        body = index_data if index_data is not None else index_body(ledger_id, index_names)
        await s3.put_object(Bucket=bucket, Key=keys[1], Body=body, Metadata=VERSION_KEYS)
    return keys
