"""Proof of ownership for artifacts that carry no owner metadata (docs/design.md §4.4).

Ledgers created before Pulsar 2.2 have no custom metadata, and objects offloaded before 2.10
carry no `managedledgername`: the artifact alone cannot show whose it is, so the metadata
match (S2) has nothing to compare. What can still prove it is the intent itself: a PDLI
signed by a trusted marker key, for an owner the marker read (a broker's trim through the
marker, or the follower's observation of a broker's trim), whose owner has since unlinked
the ledger (the fence token is reached and the owner no longer references this copy, or the
owner is gone).

A reconciler or operator PDLI is never such a proof, signed or not: the marker did not read
the ledger in its owner's list, so the ledger may be another application's (DistributedLog
keeps ledgers without Pulsar metadata in the same BookKeeper cluster).
"""

from __future__ import annotations

from services.verifier.model import Component, Source, Target, Tier
from services.verifier.owners import Owner

# Sources whose intents the marker built from the owner's list it had just read.
_READ_FROM_OWNER = frozenset({Source.BROKER, Source.OBSERVED})


def proves_unlink(target: Target, owner: Owner) -> bool:
    """True when a signed intent shows the owner listed this copy and has since unlinked it.

    `owner` must be a successful read (absence included); never call this with a guess.
    """
    if not target.signed or target.source not in _READ_FROM_OWNER:
        return False
    if not owner.exists:
        return True  # the owner itself was deleted: nothing references the copy any more
    token = target.fence_token
    if token is None or owner.version < token:
        return False
    if target.ledger_id in owner.property_refs:
        return False
    if target.component is Component.COMPACTED and owner.compaction_unknown(target.ledger_id):
        return False  # the live reference is in the cursor ledger: nothing shows the unlink
    if target.ledger_id not in owner.refs:
        return True
    ref = owner.refs[target.ledger_id]
    if target.tier is Tier.OFFLOAD:
        # Listed with another upload's uuid: this upload's objects are not referenced.
        return target.offload is not None and (ref is None or ref.uuid != target.offload.uuid)
    # Listed, but Pulsar reads the offloaded copy: the BookKeeper copy is a leftover.
    return ref is not None and ref.complete and ref.bookkeeper_deleted
