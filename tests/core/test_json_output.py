"""`--json` prints every field by its proto name, zeros included, integers as numbers."""

from __future__ import annotations

import json

from services.core.json_output import message_json
from tombstone.v1 import deleter_pb2 as _dl
from tombstone.v1 import pending_delete_pb2 as _pd


def test_an_empty_status_prints_zeros_not_an_empty_object() -> None:
    """A status with nothing pending names every field at 0 (protobuf's JSON prints `{}`)."""
    printed = json.loads(message_json(_dl.GetStatusResponse()))
    expected = {
        "estimated_in_flight": 0,
        "system_topic_backlog": 0,
        "retry_topic_backlog": 0,
        "in_process": 0,
        "oldest_pending_age_ms": 0,
        "dead_letter_backlog": 0,
        "dead_letters_by_reason": {},
        "holding": 0,
        "mode": "",
    }
    assert expected == printed


def test_64_bit_integers_are_numbers_in_nested_maps_and_lists() -> None:
    """int64 fields, map values and nested messages' ids are JSON numbers, not strings."""
    response = _dl.ListDeadLettersResponse(
        dead_letters=[
            _dl.DeadLetter(
                message_id="7:1:0:-1",
                pdli=_pd.PendingDeleteLedgerInfo(ledger_id=2**53 + 1),
                dead_lettered_at_ms=1_700_000_000_000,
            )
        ]
    )
    status = _dl.GetStatusResponse(dead_letters_by_reason={"forged": 3}, holding=4)
    [letter] = json.loads(message_json(response))["dead_letters"]
    printed = json.loads(message_json(status))
    expected = (2**53 + 1, 1_700_000_000_000, 3, 4)
    actual = (
        letter["pdli"]["ledger_id"],
        letter["dead_lettered_at_ms"],
        printed["dead_letters_by_reason"]["forged"],
        printed["holding"],
    )
    assert expected == actual
