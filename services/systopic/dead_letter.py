"""The dead-letter topic: what a dead letter carries, how to read one back and replay it.

A dead letter keeps the original payload byte for byte (an undecodable message too, so an
operator can inspect it) and says why in properties. Messages that the client's own
dead-letter policy moved there (a handler that kept crashing) carry no reason of ours; they
are listed with the reason code `redelivery_exhausted`.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from services.core.errors import CorruptData
from services.systopic.consumer import IncomingMessage
from services.systopic.messages import PROP_LEDGER_ID, decode_intent, encode_intent
from services.systopic.ports import OutgoingMessage
from services.systopic.retry import PROP_RETRY_COUNT, retry_count
from tombstone.v1 import pending_delete_pb2 as _pd

PROP_REASON_CODE = "deadLetterReason"
PROP_REASON = "deadLetterDetail"
PROP_DEAD_LETTERED_AT = "deadLetteredAtMs"
PROP_ORIGIN_TOPIC = "originTopic"
PROP_ORIGIN_ID = "originMessageId"
PROP_REPLAYED_FROM = "replayedFrom"
# Set by the Pulsar client's dead-letter policy.
CLIENT_ORIGIN_PROPERTY = "ORIGIN_MESSAGE_ID"
_MAX_REASON = 1000


class ReasonCode(enum.StrEnum):
    """Why a message is in the dead-letter topic."""

    RETRIES_EXHAUSTED = "retries_exhausted"
    """Every retry ended in RETRY or a transient failure; the last reason is kept."""
    UNDECODABLE = "undecodable"
    """Not a PDLI (or its properties contradict it)."""
    PERMANENT_ERROR = "permanent_error"
    """A delete failed in a way retrying cannot fix (access denied, bad evidence...)."""
    REDELIVERY_EXHAUSTED = "redelivery_exhausted"
    """Moved by the client's backstop after the handler failed on it repeatedly."""
    INVALID = "invalid"
    """The verifier found the PDLI malformed (a field is missing or not canonical)."""
    MISMATCH = "mismatch"
    """The artifact's metadata names another owner, or its location is not allowed."""
    FORGED = "forged"
    """Unsigned or badly signed where signatures are required."""
    UNSUPPORTED = "unsupported"
    """Well-formed, but nothing this deployment can decide or act on."""
    FOREIGN = "foreign"
    """Perhaps another Pulsar cluster's (shared BookKeeper): declare the sharing, or replay
    once the namespace is known here or named as deleted."""
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class DeadLetterEntry:
    """One message read back from the dead-letter topic."""

    message_id: str
    payload: bytes
    reason_code: str
    reason: str
    retry_count: int
    dead_lettered_at_ms: int
    pdli: _pd.PendingDeleteLedgerInfo | None
    """None when the payload does not decode."""


def dead_letter_message(
    message: IncomingMessage,
    *,
    reason_code: ReasonCode,
    reason: str,
    attempts: int,
    now_ms: int | None = None,
) -> OutgoingMessage:
    """The dead letter for `message`: the same payload, the reason in properties."""
    properties = {
        key: value for key, value in message.properties.items() if key != PROP_RETRY_COUNT
    }
    properties.update(
        {
            PROP_REASON_CODE: reason_code.value,
            PROP_REASON: reason[:_MAX_REASON],
            PROP_RETRY_COUNT: str(attempts),
            PROP_DEAD_LETTERED_AT: str(now_ms if now_ms is not None else _now_ms()),
            PROP_ORIGIN_TOPIC: message.topic,
            PROP_ORIGIN_ID: message.message_id,
        }
    )
    key = properties.get(PROP_LEDGER_ID) or message.message_id
    return OutgoingMessage(message.payload, key, properties)


def read_dead_letter(message: IncomingMessage) -> DeadLetterEntry:
    """Interpret a message of the dead-letter topic (never fails: garbage stays listable)."""
    props = message.properties
    code = props.get(PROP_REASON_CODE)
    if code is None:
        code = (
            ReasonCode.REDELIVERY_EXHAUSTED
            if CLIENT_ORIGIN_PROPERTY in props
            else ReasonCode.UNKNOWN
        )
    try:
        pdli: _pd.PendingDeleteLedgerInfo | None = decode_intent(message.payload, props)
    except CorruptData:
        pdli = None
    try:
        count = retry_count(props)
    except CorruptData:
        count = -1
    return DeadLetterEntry(
        message_id=message.message_id,
        payload=message.payload,
        reason_code=str(code),
        reason=props.get(PROP_REASON, ""),
        retry_count=count,
        dead_lettered_at_ms=_int(props.get(PROP_DEAD_LETTERED_AT)) or message.publish_time_ms,
        pdli=pdli,
    )


def replay_message(entry: DeadLetterEntry, *, now_ms: int | None = None) -> OutgoingMessage:
    """The PDLI of `entry` for the system topic, due now, with a fresh retry budget.

    `CorruptData` if the dead letter holds no decodable PDLI (nothing to replay).
    """
    if entry.pdli is None or not entry.pdli.HasField("ledger_id"):
        raise CorruptData(f"dead letter {entry.message_id} holds no PDLI to replay")
    pdli = _pd.PendingDeleteLedgerInfo()
    pdli.CopyFrom(entry.pdli)
    pdli.not_before_ms = now_ms if now_ms is not None else _now_ms()
    message = encode_intent(pdli)
    properties = dict(message.properties)
    properties[PROP_REPLAYED_FROM] = entry.message_id
    return OutgoingMessage(message.payload, message.partition_key, properties)


def matches(entry: DeadLetterEntry, reason_code: str) -> bool:
    """Whether `entry` passes a reason-code filter (empty matches all)."""
    return not reason_code or entry.reason_code == reason_code


def _int(raw: str | None) -> int:
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = [
    "CLIENT_ORIGIN_PROPERTY",
    "PROP_ORIGIN_ID",
    "PROP_REASON",
    "PROP_REASON_CODE",
    "DeadLetterEntry",
    "ReasonCode",
    "dead_letter_message",
    "matches",
    "read_dead_letter",
    "replay_message",
]
