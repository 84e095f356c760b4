"""The verifier: the safety check before every hard delete (docs/design.md §4).

`DecisionEngine.verify(pdli)` answers DELETE (with evidence), SKIP (IN_USE, MISMATCH,
NOT_FOUND, INVALID) or RETRY; `BelievedSet` holds the marker's believed identities durably in
the metadata store; `OwnerCache` serves ML lists, cursors and schema locators under watches.
"""

from services.verifier.believed import BelievedConfig, BelievedSet, identity_key
from services.verifier.decision import DecisionEngine, DecisionPolicy
from services.verifier.model import (
    BookKeeperEvidence,
    Decision,
    OffloadEvidence,
    SkipReason,
    Target,
    Verdict,
)
from services.verifier.offload import OffloadInspector, OffloadPolicy
from services.verifier.owners import OwnerCache
from services.verifier.validation import parse_target

__all__ = [
    "BelievedConfig",
    "BelievedSet",
    "BookKeeperEvidence",
    "Decision",
    "DecisionEngine",
    "DecisionPolicy",
    "OffloadEvidence",
    "OffloadInspector",
    "OffloadPolicy",
    "OwnerCache",
    "SkipReason",
    "Target",
    "Verdict",
    "identity_key",
    "parse_target",
]
