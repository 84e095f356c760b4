"""How a `PendingDeleteLedgerInfo` travels on the system topic.

The payload is the serialized protobuf. A few properties repeat the routing facts so that
tools (and a deleter deciding whether a message is due) can read them without decoding the
payload; the payload stays the single source of truth. The partition key is the ledger id,
so both tiers of one ledger land on one partition and are handled by one consumer.

Signing happens here, as the last step before the bytes exist: every path that sends a PDLI
(Mark, caller-writes, reconciler requests, late-write re-sends) encodes it with
`encode_intent` or `IntentEncoder`, given the marker's `IntentSigner`. The signature fields
are appended to the serialization (concatenated protobuf encodings parse as one message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from google.protobuf import message as _message

from services.core.enums import enum_name
from services.core.errors import CorruptData
from services.core.signing import CanonicalTemplate, IntentSigner, canonical_bytes
from services.systopic.ports import OutgoingMessage
from tombstone.v1 import pending_delete_pb2 as _pd

PROP_LEDGER_ID = "ledgerId"
PROP_LEDGER_TYPE = "ledgerType"
PROP_OWNER = "owner"


_CURSOR_OWNED = frozenset({_pd.MANAGED_CURSOR, _pd.COMPACTED_LEDGER, _pd.DELAYED_INDEX_BUCKET})
"""Components whose owner znode is a cursor znode (its id, or one of its properties)."""


def owner_label(pdli: _pd.PendingDeleteLedgerInfo) -> str:
    """A readable owner: the ML name, `ml/cursor` (a cursor ledger, or a compacted ledger or
    bucket snapshot its cursor's properties name: the component tells which), or
    `schema:<id>`."""
    if pdli.component == _pd.SCHEMA_STORAGE:
        return f"schema:{pdli.schema_id}"
    if pdli.component in _CURSOR_OWNED:
        return f"{pdli.managed_ledger_name}/{pdli.cursor_name}"
    return pdli.managed_ledger_name


_TYPE_NAMES = {value: name for name, value in _pd.LedgerType.items()}


def _type_name(ledger_type: int) -> str:
    # A number outside the enum (a forged or newer PDLI) must not stop a retry copy from
    # being built: the copy would be released and redelivered forever instead.
    name = _TYPE_NAMES.get(ledger_type)  # type: ignore[call-overload]
    return name if name is not None else enum_name(_pd.LedgerType.Name, ledger_type)


def _shared_properties(pdli: _pd.PendingDeleteLedgerInfo) -> dict[str, str]:
    # Three properties in all (with the ledger id and type): each one costs the client and
    # the broker work per message, and everything else is in the payload.
    return {PROP_OWNER: owner_label(pdli)}


def encode_intent(
    pdli: _pd.PendingDeleteLedgerInfo, signer: IntentSigner | None = None
) -> OutgoingMessage:
    """The message for one PDLI; `ledger_id` must be set. With a `signer`, the payload
    carries its key id and a signature over the PDLI's fields (replacing any earlier one);
    without, the PDLI is encoded as it is (a copy keeps the signature it has)."""
    if not pdli.HasField("ledger_id"):
        raise ValueError("a PDLI without ledger_id cannot be routed")
    ledger_id = str(pdli.ledger_id)
    properties = _shared_properties(pdli)
    properties[PROP_LEDGER_ID] = ledger_id
    properties[PROP_LEDGER_TYPE] = _type_name(pdli.ledger_type)
    payload = pdli.SerializeToString()
    if signer is not None:
        [fields] = signer.signature_fields([canonical_bytes(pdli)])
        payload += fields
    return OutgoingMessage(payload, ledger_id, properties)


def encode_intents(
    pdlis: Sequence[_pd.PendingDeleteLedgerInfo], signer: IntentSigner | None = None
) -> list[OutgoingMessage]:
    """`encode_intent` of each PDLI, signed together (one signature per batch)."""
    if signer is None:
        return [encode_intent(p) for p in pdlis]
    messages = [encode_intent(p) for p in pdlis]
    fields = signer.signature_fields([canonical_bytes(p) for p in pdlis])
    return [m._replace(payload=m.payload + f) for m, f in zip(messages, fields, strict=True)]


class IntentEncoder:
    """Encodes many PDLIs that share every field but the ledger's own, cheaply.

    The shared fields are serialized once; each message appends the serialization of the
    ledger's fields (id, type, offload context). Concatenated protobuf encodings parse as the
    merged message, so every payload decodes exactly as `encode_intent` of the full PDLI
    (with the same `signer`: the signature fields come last).
    """

    def __init__(
        self, shared: _pd.PendingDeleteLedgerInfo, signer: IntentSigner | None = None
    ) -> None:
        if shared.HasField("ledger_id") or shared.ledger_type or shared.HasField("offload_context"):
            raise ValueError("the shared part must not carry ledger fields")
        if shared.signing_key_id or shared.signature:
            raise ValueError("the shared part must not carry a signature")
        self._head = shared.SerializeToString()
        self._properties = _shared_properties(shared)
        self._signer = signer
        self._canonical = CanonicalTemplate(shared) if signer is not None else None

    def encode(self, own: _pd.PendingDeleteLedgerInfo) -> OutgoingMessage:
        """The message for the PDLI `shared` merged with `own` (which has `ledger_id`)."""
        [message] = self.encode_many([own])
        return message

    def encode_many(self, owns: Sequence[_pd.PendingDeleteLedgerInfo]) -> list[OutgoingMessage]:
        """The messages for `shared` merged with each of `owns`, signed together."""
        if self._signer is None or self._canonical is None:
            return [self._message(own, b"") for own in owns]
        leaves = [self._canonical.leaf_hash(own) for own in owns]
        fields = self._signer.signature_fields_of_leaves(leaves)
        return [self._message(own, tail) for own, tail in zip(owns, fields, strict=True)]

    def _message(self, own: _pd.PendingDeleteLedgerInfo, tail: bytes) -> OutgoingMessage:
        """`own`'s message, `tail` (its signature fields, or nothing) after its fields."""
        ledger_id = str(own.ledger_id)
        properties = {
            **self._properties,
            PROP_LEDGER_ID: ledger_id,
            PROP_LEDGER_TYPE: _type_name(own.ledger_type),
        }
        payload = b"".join((self._head, own.SerializeToString(), tail))
        return OutgoingMessage(payload, ledger_id, properties)


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
