"""Pure decisions of a Mark call: which ledgers qualify and the PDLIs they need."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.config import OffloadDefaults
from services.marker.owners import LedgerRef, Owner, OwnerSnapshot
from services.metadata.offload import is_legacy_context, legacy_location
from tombstone.v1 import marker_pb2 as _mk
from tombstone.v1 import pending_delete_pb2 as _pd

_NO_DEFAULTS = OffloadDefaults()


@dataclass(frozen=True)
class MarkRequest:
    """A validated MarkLedgers request."""

    owner: Owner
    ledger_ids: tuple[int, ...]
    caller_writes: bool = False
    expected_version: int | None = None
    source: _pd.Source.ValueType = _pd.BROKER
    request_id: str = ""
    new_cursor_ledger_id: int = -1
    reconciler_ledgers: tuple[LedgerRef, ...] = ()
    """RECONCILER only: ledgers with explicit tiers (and offload contexts found by a scan)."""
    seen_at_ms: int = 0
    """RECONCILER only: when the scan that found the ledgers started (0: unknown)."""

    @property
    def reconciler(self) -> bool:
        """Reconciler requests name ledgers the owner no longer references."""
        return self.source == _pd.RECONCILER


@dataclass(frozen=True)
class NotMarked:
    ledger_id: int
    reason: _mk.NotMarkedReason.ValueType
    message: str


@dataclass
class Plan:
    """Ledgers that get PDLIs, and those refused before anything is sent."""

    refs: list[LedgerRef] = field(default_factory=list)
    refused: list[NotMarked] = field(default_factory=list)


def plan_marking(
    request: MarkRequest, snapshot: OwnerSnapshot | None, version: int, *, offload_tier: bool = True
) -> Plan:
    """Classify the requested ledgers against the owner as read (None: the owner is absent).

    With `offload_tier` off (a marker for a cluster that does not offload), offloaded ledgers
    are refused: unlinking them without an OFFLOAD_LEDGER intent would orphan their objects.
    """
    plan = _plan(request, snapshot, version)
    if not offload_tier:
        refused = [ref for ref in plan.refs if _pd.OFFLOAD_LEDGER in ref.tiers]
        plan.refs = [ref for ref in plan.refs if _pd.OFFLOAD_LEDGER not in ref.tiers]
        why = "offloaded, and this marker sends no offload-tier intents (MARKER_OFFLOAD_TIER)"
        plan.refused += [NotMarked(ref.ledger_id, _mk.CANNOT_UNLINK, why) for ref in refused]
    return plan


def _plan(request: MarkRequest, snapshot: OwnerSnapshot | None, version: int) -> Plan:
    if request.reconciler:
        return _plan_reconciler(request, snapshot, version)
    assert snapshot is not None, "only reconciler requests accept an absent owner"
    plan = Plan()
    where = f"{request.owner.path} at version {version}"
    for ledger_id in request.ledger_ids:
        ref = snapshot.reference(ledger_id)
        if ref is None:
            message = f"not referenced by {where}"
            plan.refused.append(NotMarked(ledger_id, _mk.NOT_REFERENCED, message))
        else:
            plan.refs.append(ref)
    blocked = snapshot.blocked([ref.ledger_id for ref in plan.refs])
    if blocked:
        plan.refs = [ref for ref in plan.refs if ref.ledger_id not in blocked]
        plan.refused += [NotMarked(i, _mk.CANNOT_UNLINK, why) for i, why in blocked.items()]
    return plan


def _plan_reconciler(request: MarkRequest, snapshot: OwnerSnapshot | None, version: int) -> Plan:
    plan = Plan()
    # Plain ledger ids are BookKeeper-tier entries; explicit entries name their tiers.
    wanted = [LedgerRef(i) for i in request.ledger_ids] + list(request.reconciler_ledgers)
    for ref in wanted:
        listed = snapshot.reference(ref.ledger_id) if snapshot is not None else None
        tier = None if listed is None else still_referenced_tier(listed, ref)
        if tier is not None:
            message = (
                f"{_pd.LedgerType.Name(tier)} still referenced by {request.owner.path} "
                f"at version {version}"
            )
            plan.refused.append(NotMarked(ref.ledger_id, _mk.STILL_REFERENCED, message))
        else:
            plan.refs.append(ref)
    return plan


def still_referenced_tier(listed: LedgerRef, wanted: LedgerRef) -> _pd.LedgerType.ValueType | None:
    """The first requested tier the owner's reference `listed` still covers (as the verifier
    judges it), or None. The BookKeeper copy is free only when the listed offload is complete
    and `bookkeeperDeleted`; an offloaded copy only when listed with another uuid."""
    offload = listed.offload
    for tier in wanted.tiers:
        if tier == _pd.LEDGER and not (
            offload is not None and offload.complete and offload.bookkeeper_deleted
        ):
            return tier
        if tier == _pd.OFFLOAD_LEDGER and _same_upload(offload, wanted.offload):
            return tier
    return None


def _same_upload(listed: _pd.OffloadContext | None, wanted: _pd.OffloadContext | None) -> bool:
    if listed is None or wanted is None:
        return listed is not None  # no uuid asked: any listed upload counts as referenced
    return (listed.uuid_msb, listed.uuid_lsb) == (wanted.uuid_msb, wanted.uuid_lsb)


@dataclass(frozen=True)
class Stamp:
    """The fields every PDLI of one call shares."""

    fence_token: int
    marked_at_ms: int
    not_before_ms: int
    marker_id: str
    cluster: str
    seen_at_ms: int = 0
    """When the sender last saw the ledgers as the ones it means (0: unknown). Never later
    than `marked_at_ms` (`shared_fields` holds it there)."""


def shared_fields(request: MarkRequest, stamp: Stamp) -> _pd.PendingDeleteLedgerInfo:
    """The fields every PDLI of one call has in common (owner, token, times, source...)."""
    pdli = _pd.PendingDeleteLedgerInfo(
        fence_token=stamp.fence_token,
        marked_at_ms=stamp.marked_at_ms,
        not_before_ms=stamp.not_before_ms,
        source=request.source,
        marker_id=stamp.marker_id,
        cluster=stamp.cluster,
        request_id=request.request_id,
        # The verifier refuses a stamp later than the recording; a sender's clock ahead of
        # the marker's (the store's, for the follower) must not make its intents invalid.
        seen_at_ms=min(stamp.seen_at_ms, stamp.marked_at_ms),
    )
    request.owner.stamp(pdli)
    return pdli


def own_fields(
    ref: LedgerRef,
    tier: _pd.LedgerType.ValueType,
    defaults: OffloadDefaults = _NO_DEFAULTS,
) -> _pd.PendingDeleteLedgerInfo:
    """The fields of one (ledger, tier): id, type and, for offloaded ledgers, the context."""
    if ref.offload is None:
        return _pd.PendingDeleteLedgerInfo(ledger_id=ref.ledger_id, ledger_type=tier)
    return _pd.PendingDeleteLedgerInfo(
        ledger_id=ref.ledger_id, ledger_type=tier, offload_context=located(ref.offload, defaults)
    )


def located(context: _pd.OffloadContext, defaults: OffloadDefaults) -> _pd.OffloadContext:
    """A 2.1 context (no driver name, no properties) with the operator's default driver and
    bucket filled in, so the signed PDLI names where its objects are; others as they are.

    Without a default the context stays empty and the verifier answers UNSUPPORTED (the
    PDLI is dead-lettered, never acknowledged).
    """
    if defaults.bucket is None or not is_legacy_context(
        context.driver_name, context.driver_metadata
    ):
        return context
    filled = _pd.OffloadContext()
    filled.CopyFrom(context)
    filled.driver_name, properties = legacy_location(defaults.driver, defaults.bucket)
    filled.driver_metadata.update(properties)
    return filled


def build_pdli(
    request: MarkRequest, ref: LedgerRef, tier: _pd.LedgerType.ValueType, stamp: Stamp
) -> _pd.PendingDeleteLedgerInfo:
    """One complete PDLI (shared fields merged with the ledger's own)."""
    pdli = shared_fields(request, stamp)
    pdli.MergeFrom(own_fields(ref, tier))
    return pdli


def fence_token(request: MarkRequest, version: int) -> int:
    """The owner version the unlinking write produces: read version + 1.

    Reconciler requests unlink nothing, so their token is the version already reached (0 when
    the owner is absent): a ledger that is listed again is then simply IN_USE.
    """
    if request.reconciler:
        return max(version, 0)
    return version + 1
