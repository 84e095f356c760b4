"""The marker signs every PDLI it sends, on every path (docs/design.md §4.7)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from services.core.errors import ConfigError
from services.core.signing import IntentSigner, SignatureStatus, TrustedKeys
from services.core.signing_keys import generate_key_pair, write_key_pair
from services.marker.config import MarkerConfig
from services.marker.journal import ReceiptJournal
from services.marker.marking import Marker, MarkingSettings
from tests.marker.builders import ML_PATH, ledger, ml_bytes
from tests.marker.conftest import SETTINGS, ml_request
from tests.marker.fakes import FakePublisher, FakeStore
from tombstone.v1 import pending_delete_pb2 as _pd

KEY = Ed25519PrivateKey.generate()
SIGNER = IntentSigner({"old": Ed25519PrivateKey.generate(), "new": KEY}, "new")
TRUSTED = TrustedKeys({"new": KEY.public_key()})


def signing_marker(
    store: FakeStore, publisher: FakePublisher, settings: MarkingSettings = SETTINGS
) -> Marker:
    journal = ReceiptJournal(retry_window=settings.retry_window)
    return Marker(
        store=store, publisher=publisher, journal=journal, settings=settings, signer=SIGNER
    )


def statuses(publisher: FakePublisher) -> list[SignatureStatus]:
    return [TRUSTED.check(pdli) for pdli in publisher.pdlis]


async def test_mark_caller_writes_and_reconciler_pdlis_are_signed_by_the_active_key(
    store: FakeStore, publisher: FakePublisher
) -> None:
    """Both tiers of an offloaded ledger, a caller-writes call and a reconciler call: every
    PDLI carries the active key id and a valid signature."""
    marker = signing_marker(store, publisher)
    store.put(ML_PATH, ml_bytes(ledger(1, offload="complete"), ledger(2), ledger(3)))
    await marker.mark(ml_request(1))
    await marker.mark(ml_request(2, caller_writes=True))
    await marker.mark(ml_request(9, source=_pd.RECONCILER))
    assert len(publisher.pdlis) == 4
    assert {"new"} == {pdli.signing_key_id for pdli in publisher.pdlis}
    assert statuses(publisher) == [SignatureStatus.VALID] * 4


async def test_late_write_resends_are_signed_afresh(
    store: FakeStore, publisher: FakePublisher
) -> None:
    """The re-sent PDLI has a later marked_at_ms, so it carries a new, valid signature."""
    settings = MarkingSettings(
        marker_id="m",
        retry_window=timedelta(milliseconds=50),
        pause_after_send=timedelta(milliseconds=80),
    )
    marker = signing_marker(store, publisher, settings)
    store.put(ML_PATH, ml_bytes(ledger(1)))
    await marker.mark(ml_request(1))
    first, second = publisher.pdlis
    assert first.signature != second.signature
    assert statuses(publisher) == [SignatureStatus.VALID] * 2


async def test_without_a_signer_pdlis_are_unsigned(
    marker: Marker, store: FakeStore, publisher: FakePublisher
) -> None:
    store.put(ML_PATH, ml_bytes(ledger(1)))
    await marker.mark(ml_request(1))
    assert statuses(publisher) == [SignatureStatus.UNSIGNED]


def test_signing_keys_from_the_environment(tmp_path: Path) -> None:
    """Several keys, the active one named; a missing active id or a required signature
    without a key is refused at start."""
    old, _ = write_key_pair(tmp_path, generate_key_pair(), "old")
    new, _ = write_key_pair(tmp_path, generate_key_pair(), "new")
    keys = f"old={old},new={new}"
    env = {"TOMBSTONE_MARKER_SIGNING_KEYS": keys, "TOMBSTONE_MARKER_SIGNING_KEY_ID": "new"}
    signer = MarkerConfig.from_env(env).signer
    assert signer is not None
    assert (signer.key_ids, signer.key_id) == (("new", "old"), "new")
    with pytest.raises(ConfigError, match="TOMBSTONE_MARKER_SIGNING_KEY_ID"):
        MarkerConfig.from_env({"TOMBSTONE_MARKER_SIGNING_KEYS": keys})
    with pytest.raises(ConfigError, match="TOMBSTONE_MARKER_SIGNING_KEYS"):
        MarkerConfig.from_env({"TOMBSTONE_MARKER_REQUIRE_SIGNED": "true"})
    assert MarkerConfig.from_env({}).signer is None
