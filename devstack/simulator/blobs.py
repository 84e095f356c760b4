"""The bytes of offloaded objects, as Pulsar's blob-store offloader lays them out.

A data object is one block: a 128-byte header (magic 0xFBDBABCB, header length, block length,
first entry id, zero padding) followed by entries framed as (int length, long entry id,
payload). The index object is built by the metadata layer (`build_index_block`) around the
ledger's raw LedgerMetadataFormat. Only a few entries per ledger are materialised: the
objects exist to be found, matched and deleted, not read.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import replace

from devstack.simulator.model import OffloadObject
from services.metadata import build_index_block, encode_ledger_metadata
from services.metadata.ledger_metadata import HEADER_PREFIX, LedgerMetadata
from services.metadata.offload import DATA_BLOCK_MAGIC

DATA_HEADER_LENGTH = 128
_BLOCK_HEADER = struct.Struct(">iqqq")
_ENTRY_HEADER = struct.Struct(">iq")
MAX_ENTRIES_PER_OBJECT = 8
_PAYLOAD = 32


def data_object(obj: OffloadObject) -> bytes:
    entries = min(obj.source.entries, MAX_ENTRIES_PER_OBJECT)
    body = b"".join(_entry(obj.ledger_id, entry_id) for entry_id in range(entries))
    block_length = DATA_HEADER_LENGTH + len(body)
    header = _BLOCK_HEADER.pack(DATA_BLOCK_MAGIC - 2**32, DATA_HEADER_LENGTH, block_length, 0)
    return header.ljust(DATA_HEADER_LENGTH, b"\0") + body


def _entry(ledger_id: int, entry_id: int) -> bytes:
    payload = hashlib.sha256(f"{ledger_id}:{entry_id}".encode()).digest()[:_PAYLOAD]
    return _ENTRY_HEADER.pack(len(payload), entry_id) + payload


def index_object(obj: OffloadObject) -> bytes:
    return build_index_block(
        segment_metadata=raw_ledger_metadata(obj),
        entries=[(0, 1, 0)],
        data_object_length=len(data_object(obj)),
        data_header_length=DATA_HEADER_LENGTH,
    )


def object_body(obj: OffloadObject) -> bytes:
    return index_object(obj) if obj.role == "index" else data_object(obj)


def raw_ledger_metadata(obj: OffloadObject) -> bytes:
    """The ledger's LedgerMetadataFormat without the version header or cToken.

    `OffloadUtils.buildLedgerMetadataFormat` writes no cToken; the v3 encoding of the same
    metadata with cToken 0 is header + varint length + exactly those bytes.
    """
    return raw_metadata(obj.source.metadata)


def raw_metadata(metadata: LedgerMetadata) -> bytes:
    """`raw_ledger_metadata` of one ledger's metadata (the index's segment metadata)."""
    encoded = encode_ledger_metadata(replace(metadata, ctoken=0), format_version=3)
    rest = encoded[len(HEADER_PREFIX) + 2 :]  # after "BookieMetadataFormatVersion\t3\n"
    skip = next(i for i, byte in enumerate(rest) if not byte & 0x80) + 1
    return rest[skip:]
