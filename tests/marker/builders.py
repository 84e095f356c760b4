"""Owner znode contents in Pulsar's formats, built with the metadata package's codecs."""

from __future__ import annotations

import uuid

from services.metadata import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)

TOPIC = "persistent://public/default/orders"
ML_NAME = "public/default/persistent/orders"
ML_PATH = f"/managed-ledgers/{ML_NAME}"
CURSOR = "sub-a"
CURSOR_PATH = f"{ML_PATH}/{CURSOR}"
SCHEMA_ID = "public/default/orders"
SCHEMA_PATH = f"/schemas/{SCHEMA_ID}"
UUID = uuid.UUID("6f1c1d8e-4b1f-4e0a-9a55-0123456789ab")


def _signed(bits: int) -> int:
    return bits - (1 << 64) if bits >= 1 << 63 else bits


UID_MSB = _signed(UUID.int >> 64)
UID_LSB = _signed(UUID.int & ((1 << 64) - 1))


def ledger(ledger_id: int, *, offload: str | None = None) -> LedgerInfo:
    """A closed ledger; `offload` is None, "started", "complete" or "bk_deleted"."""
    info = LedgerInfo(ledgerId=ledger_id, entries=10, size=1000, timestamp=1_700_000_000_000)
    if offload is not None:
        ctx = info.offloadContext
        ctx.uidMsb, ctx.uidLsb = UID_MSB, UID_LSB
        ctx.complete = offload in ("complete", "bk_deleted")
        ctx.bookkeeperDeleted = offload == "bk_deleted"
        if ctx.complete:
            ctx.timestamp = 1_700_000_100_000
        ctx.driverMetadata.name = "aws-s3"
        prop = ctx.driverMetadata.properties.add()
        prop.key, prop.value = "bucket", "offload-bucket"
    return info


def ml_bytes(*ledgers: LedgerInfo) -> bytes:
    info = ManagedLedgerInfo()
    info.ledgerInfo.extend(ledgers)
    prop = info.properties.add()
    prop.key, prop.value = "owner", "kept"
    return encode_managed_ledger_info(info)


def ml_ledger_ids(data: bytes) -> list[int]:
    from services.metadata import decode_managed_ledger_info

    return [li.ledgerId for li in decode_managed_ledger_info(data, path="test").ledgerInfo]


def cursor_bytes(cursor_ledger: int) -> bytes:
    info = ManagedCursorInfo(
        cursorsLedgerId=cursor_ledger, markDeleteLedgerId=5, markDeleteEntryId=7
    )
    return encode_cursor_info(info)


def schema_bytes(*ledger_ids: int) -> bytes:
    locator = SchemaLocator()
    for version, ledger_id in enumerate(ledger_ids):
        entry = locator.index.add()
        entry.version = version
        entry.position.ledgerId, entry.position.entryId = ledger_id, 0
        entry.hash = b"h%d" % version
    locator.info.CopyFrom(locator.index[-1])
    return encode_schema_locator(locator)
