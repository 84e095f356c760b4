"""Whether the ledger read is the incarnation the intent names (docs/oxia.md, "Ledger ids").

A ledger id can name two ledgers in turn: after PIP-454 copies a ZooKeeper cluster to Oxia,
`PulsarLedgerIdGenerator` draws ids from `<root>/idgen`'s modifications count, which the copy
sets to the znode's data version (0), not to the number of ids ZooKeeper gave out. Ids then
start again from 1: those of ledgers still present fail to be created, those of deleted ones
are given again. A stale intent for the deleted ledger (a redelivery, a retry, a replay from
the dead-letter topic, a second intent from another source) then meets a new ledger under the
same path, possibly of the same owner, where the OPEN rule's "below the owner's lowest
reference" and "the owner reached the fence token" would speak of the old one.

What tells them apart is the creation time. Every intent is stamped when it is recorded
(`marked_at_ms`, signed with the rest); the ledger it names existed then: the marker reads
the owner that lists it, the follower the version that listed it, the reconciler a scan of
existing ledgers. A later incarnation is created after the earlier one was deleted, which is
after the intent was recorded (the intent is what gets it deleted, at `not_before_ms` at the
earliest; on an unmodified broker see docs/oxia.md for the follower's case). So a ledger
created after the intent's stamp is not the intent's ledger: the verdict is MISMATCH
(dead-lettered with its reason), never DELETE, whatever the believed set says.

The creation time is the ledger metadata's own `ctime` when the client stored it (it is part
of the value, so PIP-454's copy keeps it), else the store's: the znode's `ctime` on ZooKeeper,
the record's `created_timestamp` on Oxia. A record copied by PIP-454 carries the moment of
the copy, later than any intent recorded before the migration: those intents are refused too
(the cost is written down in docs/migration-window.md), never the other way round.
"""

from __future__ import annotations

from services.verifier.model import Difference, SkipReason, Target, Verdict, skip


def other_incarnation(target: Target, *, created_ms: int, allowance_ms: int) -> Verdict | None:
    """MISMATCH when the ledger was created after the intent was recorded; None otherwise.

    `allowance_ms`: how far the store's (or the ledger client's) clock may run behind the
    marker's; a ledger created less than this before the intent is refused as well. An
    intent without a stamp (`marked_at_ms` 0: none the marker sends) is not checked.
    """
    marked_at = target.marked_at_ms
    if marked_at <= 0:
        return None
    latest = marked_at - allowance_ms
    if created_ms <= latest:
        return None
    return skip(
        SkipReason.MISMATCH,
        "other_incarnation",
        f"ledger {target.ledger_id} was created at {created_ms} ms, after the intent naming it "
        f"was recorded ({marked_at} ms): its id was given again, this is another ledger",
        differences=(Difference("created_ms", f"<= {latest}", str(created_ms)),),
    )
