"""The PDLI message format and the in-flight window."""

from __future__ import annotations

import asyncio

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.errors import CorruptData
from services.core.signing import IntentSigner, SignatureStatus, TrustedKeys
from services.systopic import InflightWindow, IntentEncoder, decode_intent, encode_intent
from tombstone.v1 import pending_delete_pb2 as _pd


def _pdli() -> _pd.PendingDeleteLedgerInfo:
    return _pd.PendingDeleteLedgerInfo(
        ledger_id=0,
        ledger_type=_pd.OFFLOAD_LEDGER,
        component=_pd.MANAGED_CURSOR,
        managed_ledger_name="t/ns/persistent/x",
        cursor_name="c",
        fence_token=4,
        not_before_ms=99,
    )


def test_round_trip_and_properties() -> None:
    """The payload decodes to the same PDLI; ledger 0 is routable; the properties name the
    ledger, its tier and its owner."""
    message = encode_intent(_pdli())
    assert _pdli() == decode_intent(message.payload, message.properties)
    assert (
        message.partition_key,
        dict(message.properties),
    ) == ("0", {"ledgerId": "0", "ledgerType": "OFFLOAD_LEDGER", "owner": "t/ns/persistent/x/c"})


def test_encoder_matches_encode_intent() -> None:
    """Shared fields serialized once plus the ledger's own decode to the full PDLI."""
    full = _pdli()
    own = _pd.PendingDeleteLedgerInfo(ledger_id=0, ledger_type=_pd.OFFLOAD_LEDGER)
    shared = _pd.PendingDeleteLedgerInfo()
    shared.CopyFrom(full)
    shared.ClearField("ledger_id")
    shared.ClearField("ledger_type")
    message = IntentEncoder(shared).encode(own)
    assert (full, encode_intent(full).properties) == (
        decode_intent(message.payload),
        message.properties,
    )


def test_encoder_refuses_ledger_fields_in_the_shared_part() -> None:
    """A shared part with a ledger id would silently be overridden: refused."""
    with pytest.raises(ValueError, match="shared part"):
        IntentEncoder(_pdli())


def test_garbage_is_corrupt() -> None:
    """A payload that is not a PDLI raises CorruptData (it goes to the DLQ, never dropped)."""
    with pytest.raises(CorruptData):
        decode_intent(b"\xff\xff\xff")


def test_contradicting_property_is_corrupt() -> None:
    """A ledgerId property that disagrees with the payload is refused."""
    message = encode_intent(_pdli())
    with pytest.raises(CorruptData, match="contradicts"):
        decode_intent(message.payload, {"ledgerId": "7"})


def test_unroutable_pdli_is_refused() -> None:
    """Without a ledger id there is no partition key."""
    with pytest.raises(ValueError, match="ledger_id"):
        encode_intent(_pd.PendingDeleteLedgerInfo())


async def test_window_serves_waiters_in_order() -> None:
    """A large waiter is not overtaken by a later small one."""
    window = InflightWindow(10)
    await window.acquire(8)
    order: list[str] = []

    async def take(name: str, count: int) -> None:
        await window.acquire(count)
        order.append(name)

    big = asyncio.create_task(take("big", 9))
    await asyncio.sleep(0)
    small = asyncio.create_task(take("small", 1))
    await asyncio.sleep(0)
    window.release(8)
    await asyncio.gather(big, small)
    assert order[:1] == ["big"]


async def test_window_cancelled_waiter_gives_way() -> None:
    """A cancelled waiter leaves the queue and the next one proceeds."""
    window = InflightWindow(2)
    await window.acquire(2)
    blocked = asyncio.create_task(window.acquire(2))
    await asyncio.sleep(0)
    blocked.cancel()
    window.release(1)
    await window.acquire(1)
    assert (window.in_flight, blocked.cancelled()) == (2, True)


@pytest.mark.parametrize(
    ("component", "cursor"),
    [(_pd.COMPACTED_LEDGER, "__compaction"), (_pd.DELAYED_INDEX_BUCKET, "my+sub")],
)
def test_property_owned_pdlis_travel_like_cursor_ledgers(
    component: _pd.LedgerComponent.ValueType, cursor: str
) -> None:
    """Keyed by the ledger id, labelled with the cursor znode that names them, and signed over
    component and cursor: a signed one checks as VALID after the trip, and not once either
    field is changed."""
    pdli = _pd.PendingDeleteLedgerInfo(
        ledger_id=12,
        ledger_type=_pd.LEDGER,
        component=component,
        topic_name="persistent://t/ns/x",
        managed_ledger_name="t/ns/persistent/x",
        cursor_name=cursor,
        fence_token=3,
    )
    key = Ed25519PrivateKey.generate()
    message = encode_intent(pdli, IntentSigner({"m1": key}, "m1"))
    assert (message.partition_key, message.properties["owner"]) == (
        "12",
        f"t/ns/persistent/x/{cursor}",
    )
    received = decode_intent(message.payload, message.properties)
    trusted = TrustedKeys({"m1": key.public_key()})
    assert trusted.check(received) is SignatureStatus.VALID
    for change in ("component", "cursor_name"):
        altered = _pd.PendingDeleteLedgerInfo()
        altered.CopyFrom(received)
        if change == "component":
            altered.component = _pd.MANAGED_CURSOR
        else:
            altered.cursor_name = "other"
        assert trusted.check(altered) is not SignatureStatus.VALID
