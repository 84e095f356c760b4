"""What the receipt of a round's last message says about every message of the round.

A round is a run of messages handed to one (partition) producer back to back, of which only
the last carries a receipt callback (see `_lanes.py` for why). The client batches consecutive
messages of a producer into one broker message, which the broker stores or refuses as a
whole, and it reports the last message's position in its batch (`batch_index`). So:

- the tail failed: nothing of the round is known to be stored; every message failed;
- the tail was stored at position k: the k messages before it in the round (at most) were in
  the same batch and were stored with it; any earlier ones were in a batch that was cut off
  before (a failure that cleared the client's queue mid-round, or its safety timer firing) and
  have no known outcome, so they are reported as failed.

Counting a stored message as failed is safe (its ledger stays listed, and the deleter never
deletes a listed ledger); counting an unstored one as accepted would unlink a ledger with no
intent on the topic, so anything unknown is a failure. No client imports here.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.systopic.ports import SendResult

CUT_OFF = (
    "no receipt: the client cut the batch before this message, so its outcome is unknown; "
    "counted as not accepted"
)


@dataclass(frozen=True)
class TailReceipt:
    """The outcome of a round's last message."""

    error: str | None = None
    """Why the tail was not stored; None when it was."""
    ledger_id: int = -1
    entry_id: int = -1
    partition: int = -1
    batch_index: int = -1
    """The tail's position in its batch; -1 when the client did not batch it."""


def round_outcomes(count: int, tail: TailReceipt) -> list[SendResult]:
    """One result per message of a round of `count` messages, in order."""
    if count <= 0:
        return []
    if tail.error is not None:
        return [SendResult(error=tail.error)] * count
    in_batch = min(count, max(tail.batch_index, 0) + 1)
    prefix = f"({tail.ledger_id},{tail.entry_id},{tail.partition},"
    first = tail.batch_index - in_batch + 1
    stored = [SendResult(f"{prefix}{index})") for index in range(first, first + in_batch)]
    return [SendResult(error=CUT_OFF)] * (count - in_batch) + stored
