"""The marker: phase 1 of the two-phase deletion protocol (docs/design.md §2).

`Marker.mark` records one PDLI per (ledger, tier) on the system topic, then unlinks the fully
accepted ledgers from their owner znode with one compare-and-set.
"""

from services.marker.config import MarkerConfig
from services.marker.marking import Marker, MarkingSettings, MarkResult
from services.marker.owners import Owner, resolve_owner
from services.marker.planning import MarkRequest, NotMarked

__all__ = [
    "MarkRequest",
    "MarkResult",
    "Marker",
    "MarkerConfig",
    "MarkingSettings",
    "NotMarked",
    "Owner",
    "resolve_owner",
]
