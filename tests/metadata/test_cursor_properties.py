"""Which ledgers a cursor znode's properties name, and the compaction rule built on them.

The cursor infos model `ManagedCursorImpl`'s znode: mark-delete `properties` (where
`AbstractTwoPhaseCompactor.phaseTwo` puts `CompactedTopicLedger`) and `cursorProperties`
(where `BucketDelayedDeliveryTracker` puts its bucket snapshots).
"""

from __future__ import annotations

import pytest

from services.metadata.cursor_properties import (
    bucket_entries,
    parse_ledger_id,
    persisted_compacted_ledger,
    property_ledger_ids,
)
from services.metadata.pulsar_formats import ManagedCursorInfo
from services.verifier.owners import Owner

KEY = "#pulsar.internal.delayed.bucket_3_9"


def info(**strings: str) -> ManagedCursorInfo:
    cursor = ManagedCursorInfo(cursorsLedgerId=-1)
    cursor.properties.add(name="CompactedTopicLedger", value=9)
    cursor.properties.add(name="other", value=4)
    for name, value in strings.items():
        cursor.cursorProperties.add(name=name, value=value)
    return cursor


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("12", 12),
        (" 12 ", 12),
        ("+12", 12),
        ("0", 0),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("-1", None),
        ("12a", None),
        ("", None),
        ("١٢", None),  # non-ASCII digits: not what Long.parseLong reads here
    ],
)
def test_parse_ledger_id(text: str, parsed: int | None) -> None:
    assert parse_ledger_id(text) == parsed


def test_every_property_value_that_is_an_id_counts() -> None:
    cursor = info(**{KEY: "21", "note": "x", "anything": "22"})
    assert property_ledger_ids(cursor) == {9, 4, 21, 22}
    assert bucket_entries(cursor, 21) == [KEY]
    assert bucket_entries(cursor, 22) == []
    assert persisted_compacted_ledger(cursor) == 9


@pytest.mark.parametrize(
    ("active", "persisted", "ledger", "unknown"),
    [
        (False, 9, 12, False),  # closed: the znode holds the live value
        (True, 9, 7, False),  # below the persisted value: the reference only moves forward
        (True, 9, 9, True),
        (True, 9, 12, True),
        (True, None, 3, True),
    ],
)
def test_compaction_unknown(
    active: bool, persisted: int | None, ledger: int, unknown: bool
) -> None:
    owner = Owner("/c", True, 1, cursor_active=active, compacted_ledger=persisted)
    assert owner.compaction_unknown(ledger) is unknown
    assert Owner("/c", False).compaction_unknown(ledger) is False
