"""How a `PendingDeleteLedgerInfo` travels on the system topic.

The payload is the serialized protobuf. A few properties repeat the routing facts so that
tools (and a deleter deciding whether a message is due) can read them without decoding the
payload; the payload stays the single source of truth. The partition key is the ledger id,
so both tiers of one ledger land on one partition and are handled by one consumer.
"""

from __future__ import annotations

from collections.abc import Mapping

from google.protobuf import message as _message

from services.core.errors import CorruptData
from services.systopic.ports import OutgoingMessage
from tombstone.v1 import pending_delete_pb2 as _pd

PROP_LEDGER_ID = "ledgerId"
PROP_LEDGER_TYPE = "ledgerType"
PROP_COMPONENT = "component"
PROP_OWNER = "owner"
PROP_NOT_BEFORE = "notBeforeMs"
PROP_FENCE_TOKEN = "fenceToken"


def owner_label(pdli: _pd.PendingDeleteLedgerInfo) -> str:
    """A readable owner: the ML name, `ml/cursor`, or `schema:<id>`."""
    if pdli.component == _pd.SCHEMA_STORAGE:
        return f"schema:{pdli.schema_id}"
    if pdli.component == _pd.MANAGED_CURSOR:
        return f"{pdli.managed_ledger_name}/{pdli.cursor_name}"
    return pdli.managed_ledger_name


def encode_intent(pdli: _pd.PendingDeleteLedgerInfo) -> OutgoingMessage:
    """The message for one PDLI; `ledger_id` must be set."""
    if not pdli.HasField("ledger_id"):
        raise ValueError("a PDLI without ledger_id cannot be routed")
    ledger_id = str(pdli.ledger_id)
    properties = {
        PROP_LEDGER_ID: ledger_id,
        PROP_LEDGER_TYPE: _pd.LedgerType.Name(pdli.ledger_type),
        PROP_COMPONENT: _pd.LedgerComponent.Name(pdli.component),
        PROP_OWNER: owner_label(pdli),
        PROP_NOT_BEFORE: str(pdli.not_before_ms),
    }
    if pdli.HasField("fence_token"):
        properties[PROP_FENCE_TOKEN] = str(pdli.fence_token)
    return OutgoingMessage(pdli.SerializeToString(), ledger_id, properties)


def decode_intent(
    payload: bytes, properties: Mapping[str, str] | None = None
) -> _pd.PendingDeleteLedgerInfo:
    """Parse a message payload; `CorruptData` if it is not a PDLI or contradicts its properties.

    Undecodable messages must go to the dead-letter topic, never be dropped: the caller
    catches `CorruptData` for that.
    """
    pdli = _pd.PendingDeleteLedgerInfo()
    try:
        pdli.ParseFromString(payload)
    except _message.DecodeError as exc:
        raise CorruptData(f"system topic message is not a PendingDeleteLedgerInfo: {exc}") from exc
    claimed = (properties or {}).get(PROP_LEDGER_ID)
    if claimed is not None and pdli.HasField("ledger_id") and claimed != str(pdli.ledger_id):
        raise CorruptData(
            f"property {PROP_LEDGER_ID}={claimed} contradicts the payload's ledger_id "
            f"{pdli.ledger_id}"
        )
    return pdli
