"""Whether the ledger read is the incarnation the intent names (docs/oxia.md, "Ledger ids").

A ledger id can name two ledgers in turn: after PIP-454 copies a ZooKeeper cluster to Oxia,
`PulsarLedgerIdGenerator` draws ids from `<root>/idgen`'s modifications count, which the copy
sets to the znode's data version (0), not to the number of ids ZooKeeper gave out. Ids then
start again from 1: those of ledgers still present fail to be created, those of deleted ones
are given again. A stale intent for the deleted ledger (a redelivery, a retry, a replay from
the dead-letter topic, a second intent from another source) then meets a new ledger under the
same path, possibly of the same owner, where the OPEN rule's "below the owner's lowest
reference" and "the owner reached the fence token" would speak of the old one.

What tells them apart is the creation time, compared with a stamp the intent carries
(signed with the rest): a moment at which the ledger the intent names existed and was seen
as the one it means. A later incarnation is created after the earlier one was deleted, and
that delete follows the stamp, so a ledger created after the stamp is not the intent's
ledger: the verdict is MISMATCH (dead-lettered with its reason), never DELETE, whatever the
believed set says. The stamp is:

- `seen_at_ms` when set. The follower sets it to the modification time of the last owner
  version it read that listed the ledger: the ledger existed then (it was listed, and an
  owner unlinks before its ledger is deleted), and an unmodified broker's delete comes
  after the unlink, however late the follower records the intent. The reconciler sets it to
  the start of the scan that found the ledger: the ledger was created before (it is older
  than the age window then) and was still there when the scan read it, after.
- else `marked_at_ms`, when the marker recorded the intent. The ledger existed then for
  the marker's own intents (it read the owner listing it, before the unlink), and a later
  incarnation exists only once Tombstone acted on the intent, at `not_before_ms` at the
  earliest. For an intent recorded after the unlink by a sender that did not stamp
  `seen_at_ms` (an older follower) the broker's own delete may precede it: docs/oxia.md,
  "The follower's lag: closed, with what is left".

Validation refuses a `seen_at_ms` later than `marked_at_ms`, so the stamp used is never
later than the one the marker's recording alone proves.

The creation time is the ledger metadata's own `ctime` when the client stored it (it is part
of the value, so PIP-454's copy keeps it), else the store's: the znode's `ctime` on ZooKeeper,
the record's `created_timestamp` on Oxia. A record copied by PIP-454 carries the moment of
the copy, later than any intent recorded before the migration: those intents are refused too
(the cost is written down in docs/migration-window.md), never the other way round.
"""

from __future__ import annotations

from services.verifier.model import Difference, SkipReason, Target, Verdict, skip


def other_incarnation(target: Target, *, created_ms: int, allowance_ms: int) -> Verdict | None:
    """MISMATCH when the ledger was created after the intent's stamp; None otherwise.

    The stamp is `seen_at_ms` when set, else `marked_at_ms`. `allowance_ms`: how far the
    store's (or the ledger client's) clock may run behind the stamp's; a ledger created less
    than this before the stamp is refused as well. An intent without a stamp (both 0: none
    the marker sends) is not checked.
    """
    stamp, what = _stamp(target)
    if stamp <= 0:
        return None
    latest = stamp - allowance_ms
    if created_ms <= latest:
        return None
    return skip(
        SkipReason.MISMATCH,
        "other_incarnation",
        f"ledger {target.ledger_id} was created at {created_ms} ms, after the intent naming it "
        f"{what} ({stamp} ms): its id was given again, this is another ledger",
        differences=(Difference("created_ms", f"<= {latest}", str(created_ms)),),
    )


def _stamp(target: Target) -> tuple[int, str]:
    """The time compared with the ledger's creation, and how the reason names it."""
    if target.seen_at_ms > 0:
        return target.seen_at_ms, "saw it (seen_at_ms)"
    return target.marked_at_ms, "was recorded"
