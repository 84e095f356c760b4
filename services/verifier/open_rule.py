"""The OPEN rule (DESIGN §4.4): when an OPEN or IN_RECOVERY ledger may still be deleted.

BookKeeper's state says nothing about use: Pulsar deletes old cursor ledgers without closing
them (`ManagedCursorImpl.switchToNewLedger` persists the new `cursorsLedgerId`, then
`asyncDeleteLedger(oldLedger)`; unsubscribing removes the cursor znode, then
`asyncDeleteCursorLedger`), so an unlinked cursor ledger is usually OPEN. What OPEN can mean
is that the ledger is *about to be* referenced: a rollover, a cursor switch, a new cursor or
schema version, between the ledger's creation and the owner's write. The ledger (already
found unreferenced by step 2) is decided as closed when one of these shows it is not that:

- the topic is gone (no ML znode): nothing will write a reference to it any more;
- its owner unlinked it: the PDLI came from the owner's own list (a broker's trim through the
  marker, or the follower) with a fence token that the owner has reached, or the owner znode
  is gone altogether (unsubscribe);
- its id is below the owner's lowest current reference (ML: lowest listed ledger; cursor:
  `cursorsLedgerId`; schema: lowest indexed ledger): ids grow, and a ledger in creation is
  newer than everything its owner references;
- it is older than the age window (ledger `ctime`, else the znode's).

Otherwise the answer is RETRY, never SKIP IN_USE: SKIP is acknowledged, and a ledger that
later turns out unlinked would then never be deleted.
"""

from __future__ import annotations

from services.metadata.ledger_metadata import LedgerState
from services.verifier.model import Component, Source, Target, Verdict, retry
from services.verifier.owners import Owner

# Sources whose fence token comes from the owner's list as the marker read it.
_READ_FROM_OWNER = frozenset({Source.BROKER, Source.OBSERVED})


def open_ledger_verdict(
    target: Target,
    owner: Owner,
    *,
    state: LedgerState,
    topic_exists: bool,
    age_ms: int,
    max_age_ms: int,
) -> Verdict | None:
    """None when the unreferenced, not-CLOSED ledger is decided as closed; else RETRY."""
    if not topic_exists and target.component is not Component.SCHEMA:
        return None  # a schema locator is written after its ledger: absence proves nothing
    if _unlinked_by_owner(target, owner) or _below_current(target.ledger_id, owner):
        return None
    if age_ms >= max_age_ms:
        return None
    return retry(
        "open_ledger",
        f"ledger is {state.name}, its owner exists and nothing shows it unlinked "
        "(it may be in creation)",
    )


def _unlinked_by_owner(target: Target, owner: Owner) -> bool:
    token = target.fence_token
    if token is None or target.source not in _READ_FROM_OWNER:
        return False
    return not owner.exists or owner.version >= token


def _below_current(ledger_id: int, owner: Owner) -> bool:
    return owner.exists and bool(owner.refs) and ledger_id < min(owner.refs)
