"""The OPEN rule (docs/design.md §4.4): when an OPEN or IN_RECOVERY ledger may still be deleted.

BookKeeper's state says nothing about use: Pulsar deletes old cursor ledgers without closing
them (`ManagedCursorImpl.switchToNewLedger` persists the new `cursorsLedgerId`, then
`asyncDeleteLedger(oldLedger)`; unsubscribing removes the cursor znode, then
`asyncDeleteCursorLedger`), so an unlinked cursor ledger is usually OPEN. What OPEN can mean
is that the ledger is *about to be* referenced: a rollover, a cursor switch, a new cursor or
schema version, between the ledger's creation and the owner's write. The ledger (already
found unreferenced by step 2) is decided as closed when one of these shows it is not that:

- the topic is gone (no ML znode): nothing will write a reference to it any more;
- its owner unlinked it, and the intent proves that the owner listed it first: a signed
  intent read from the owner whose fence the owner reached, or whose owner znode is gone
  (`ownership.proves_unlink`), or the marker's own believed report of the unlink. A fence
  token alone proves nothing: anyone who can produce to the topic can write one, and "not
  listed, fence reached" also describes a ledger its owner has not listed *yet* (a new
  cursor's ledger exists before its cursor znode is written). The protocol model's
  UNPROVEN_OPEN variant finds exactly that deletion (docs/model.md);
- its id is below the owner's lowest current reference (ML: lowest listed ledger; cursor:
  `cursorsLedgerId`; schema: lowest indexed ledger; compacted ledger: the persisted
  `CompactedTopicLedger`; never for a bucket snapshot, whose seals and merges overlap): ids
  grow, and a ledger in creation is newer than everything its owner references;
- it is older than the age window (ledger `ctime`, else the znode's).

Otherwise the answer is RETRY, never SKIP IN_USE: SKIP is acknowledged, and a ledger that
later turns out unlinked would then never be deleted.
"""

from __future__ import annotations

from services.metadata.ledger_metadata import LedgerState
from services.verifier.model import Component, Target, Verdict, retry
from services.verifier.owners import Owner
from services.verifier.ownership import proves_unlink


def open_ledger_verdict(
    target: Target,
    owner: Owner,
    *,
    state: LedgerState,
    topic_exists: bool,
    age_ms: int,
    max_age_ms: int,
    believed: bool = False,
) -> Verdict | None:
    """None when the unreferenced, not-CLOSED ledger is decided as closed; else RETRY."""
    if not topic_exists and target.component is not Component.SCHEMA:
        return None  # a schema locator is written after its ledger: absence proves nothing
    unlinked = believed or proves_unlink(target, owner)
    if unlinked or _below_current(target, owner):
        return None
    if age_ms >= max_age_ms:
        return None
    return retry(
        "open_ledger",
        f"ledger is {state.name}, its owner exists and nothing shows it unlinked "
        "(it may be in creation)",
    )


def _below_current(target: Target, owner: Owner) -> bool:
    ledger_id = target.ledger_id
    if target.component is Component.BUCKET:
        # A seal and a merge may run at once: a merged bucket's newer ledger can be named
        # before an older one being sealed is, so "below every reference" proves nothing.
        return False
    if target.component is Component.COMPACTED:
        # One compaction at a time per topic, and each names a newer ledger than the last:
        # a ledger below the persisted value (never above the live one) is not in creation.
        current = owner.compacted_ledger
        return owner.exists and current is not None and ledger_id < current
    return owner.exists and bool(owner.refs) and ledger_id < min(owner.refs)
