"""The marker's reconciler path asks the other clusters that share our BookKeeper too.

A reconciler request names ledgers its scan found unreferenced by our owner (docs/design.md §7). Our
owner's absence or silence proves nothing about a ledger of a neighbour cluster
(`TOMBSTONE_SHARED_CLUSTERS`; docs/design.md §3, S2), so before any PDLI is sent the same owner is
read in each declared neighbour's metadata store: a ledger it references is refused as
STILL_REFERENCED, and every ledger of an owner that exists there but not here is refused as
OWNED_ELSEWHERE. The verifier checks the same again at deletion time; refusing here keeps such
intents out of the system topic and shows the operator why in the reconciler's report.

Unknown is not negative: a neighbour that cannot be read fails the call (`Unavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping

from services.core.errors import NotFound
from services.marker.owners import EncodingOptions, parse_snapshot
from services.marker.planning import MarkRequest, NotMarked, Plan
from services.marker.ports import OwnerStore
from tombstone.v1 import marker_pb2 as _mk


class Neighbours:
    """The declared clusters' metadata stores, by cluster name."""

    def __init__(
        self, stores: Mapping[str, OwnerStore], encoding: EncodingOptions | None = None
    ) -> None:
        self._stores = dict(stores)
        self._encoding = encoding or EncodingOptions()

    def __bool__(self) -> bool:
        return bool(self._stores)

    async def restrict(self, request: MarkRequest, plan: Plan, *, owner_here: bool) -> None:
        """Move from `plan.refs` to `plan.refused` what a neighbour references or owns."""
        owner = request.owner
        for name, store in self._stores.items():
            if not plan.refs:
                return
            try:
                node = await store.get(owner.path)
            except NotFound:
                continue
            if not owner_here:
                message = (
                    f"{owner.path} is absent here and exists in cluster {name!r}, which shares "
                    "this BookKeeper: the ledger is that cluster's"
                )
                plan.refused += [
                    NotMarked(r.ledger_id, _mk.OWNED_ELSEWHERE, message) for r in plan.refs
                ]
                plan.refs = []
                return
            snapshot = parse_snapshot(owner, node.data, self._encoding)
            kept = []
            for ref in plan.refs:
                if snapshot.reference(ref.ledger_id) is None:
                    kept.append(ref)
                    continue
                message = (
                    f"referenced by {owner.path} (version {node.version}) in cluster {name!r}, "
                    "which shares this BookKeeper"
                )
                plan.refused.append(NotMarked(ref.ledger_id, _mk.STILL_REFERENCED, message))
            plan.refs = kept
