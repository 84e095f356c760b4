"""What one tail receipt says about every message of its round (no client involved)."""

from __future__ import annotations

from services.systopic.ports import SendResult
from services.systopic.rounds import CUT_OFF, TailReceipt, round_outcomes


def test_a_stored_tail_covers_the_whole_round_in_its_batch() -> None:
    """Tail at batch position 2 of a 3-message round: all three were in its batch."""
    tail = TailReceipt(ledger_id=7, entry_id=4, partition=1, batch_index=2)
    assert [
        SendResult(message_id="(7,4,1,0)"),
        SendResult(message_id="(7,4,1,1)"),
        SendResult(message_id="(7,4,1,2)"),
    ] == round_outcomes(3, tail)


def test_a_batch_holding_earlier_messages_too_still_covers_the_round() -> None:
    """The tail sits at position 9 (the batch began before the round): the round's 2 messages
    are its positions 8 and 9."""
    tail = TailReceipt(ledger_id=7, entry_id=4, partition=0, batch_index=9)
    assert [
        SendResult(message_id="(7,4,0,8)"),
        SendResult(message_id="(7,4,0,9)"),
    ] == round_outcomes(2, tail)


def test_messages_before_a_cut_are_not_accepted() -> None:
    """The tail is at position 1: only the last two messages shared its batch; the three
    before were in a batch whose outcome is unknown, so they count as failed."""
    tail = TailReceipt(ledger_id=3, entry_id=0, partition=2, batch_index=1)
    outcomes = round_outcomes(5, tail)
    assert [o.ok for o in outcomes] == [False, False, False, True, True]
    assert {CUT_OFF} == {o.error for o in outcomes[:3]}


def test_a_failed_tail_fails_every_message_with_its_reason() -> None:
    """Nothing of the round is known to be stored."""
    outcomes = round_outcomes(4, TailReceipt(error="send failed: Timeout"))
    assert [o.error for o in outcomes] == ["send failed: Timeout"] * 4


def test_an_unbatched_tail_covers_only_itself() -> None:
    """batch_index -1 (not batched): a lone message is accepted; with others before it,
    those others are unknown."""
    tail = TailReceipt(ledger_id=1, entry_id=2, partition=-1, batch_index=-1)
    assert (
        [o.ok for o in round_outcomes(1, tail)],
        [o.ok for o in round_outcomes(2, tail)],
    ) == ([True], [False, True])


def test_an_empty_round_has_no_outcomes() -> None:
    assert round_outcomes(0, TailReceipt(batch_index=0)) == []
