"""Step 1 of the decision: turn a PDLI into a validated `Target`, or name the bad field.

Field names in errors are the PDLI's own (`ledger_id`, `offload_context.uuid_msb`...), so a
SKIP INVALID verdict or an INVALID_ARGUMENT status tells the operator exactly what is wrong.
Paths and names are checked with `services.metadata`, never re-implemented here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TypeVar

from services.core.errors import InvalidArgument
from services.metadata.offload import uuid_from_bits
from services.metadata.pulsar_names import (
    check_cursor_name,
    check_managed_ledger_name,
    check_schema_id,
    cursor_path,
    managed_ledger_name,
    managed_ledger_path,
    schema_path,
    topic_from_managed_ledger_name,
)
from services.verifier.believed import make_identity_key
from services.verifier.model import Component, OffloadTarget, Source, Target, Tier
from tombstone.v1 import pending_delete_pb2 as _pb

_TIERS: dict[int, Tier] = {_pb.LEDGER: Tier.BOOKKEEPER, _pb.OFFLOAD_LEDGER: Tier.OFFLOAD}
_COMPONENTS: dict[int, Component] = {
    _pb.MANAGED_LEDGER: Component.MANAGED_LEDGER,
    _pb.MANAGED_CURSOR: Component.CURSOR,
    _pb.SCHEMA_STORAGE: Component.SCHEMA,
    _pb.COMPACTED_LEDGER: Component.COMPACTED,
    _pb.DELAYED_INDEX_BUCKET: Component.BUCKET,
}
COMPACTION_CURSOR = "__compaction"
"""The cursor whose mark-delete properties name a topic's compacted ledger (`Compactor`)."""
_SOURCES: dict[int, Source] = {
    _pb.SOURCE_UNSPECIFIED: Source.UNSPECIFIED,
    _pb.BROKER: Source.BROKER,
    _pb.RECONCILER: Source.RECONCILER,
    _pb.OPERATOR: Source.OPERATOR,
    _pb.OBSERVED: Source.OBSERVED,
}
_MAX_LEDGER_ID = 2**63 - 1
E = TypeVar("E")


def parse_target(pdli: _pb.PendingDeleteLedgerInfo) -> Target:
    """Validate `pdli`; raise `InvalidArgument(field, problem)` on the first bad field."""
    ledger_id = _ledger_id(pdli)
    tier = _enum(_TIERS, pdli.ledger_type, "ledger_type")
    component = _enum(_COMPONENTS, pdli.component, "component")
    source = _enum(_SOURCES, pdli.source, "source")
    ml_name, ml_path, cursor, schema_id, owner_path = _owner(pdli, component)
    topic = _property_owner(pdli, tier, component, ml_name, cursor)
    offload = _offload(pdli, tier, component)
    fence = pdli.fence_token if pdli.HasField("fence_token") else None
    if fence is not None and fence < 0:
        raise InvalidArgument("fence_token", f"must be non-negative, got {fence}")
    marked_at = max(pdli.marked_at_ms, 0)
    seen_at = checked_seen_at(pdli.seen_at_ms, marked_at)
    key = make_identity_key(ledger_id, tier, component, ml_name, cursor, schema_id, offload)
    return Target(
        ledger_id=ledger_id,
        tier=tier,
        component=component,
        owner_path=owner_path,
        ml_name=ml_name,
        ml_path=ml_path,
        cursor=cursor,
        schema_id=schema_id,
        topic=topic,
        offload=offload,
        fence_token=fence,
        source=source,
        cluster=pdli.cluster,
        marked_at_ms=marked_at,
        seen_at_ms=seen_at,
        believed_key=key,
    )


def checked_seen_at(seen_at: int, marked_at: int) -> int:
    """`seen_at_ms`, or `InvalidArgument` naming it.

    Negative is no time. Later than `marked_at_ms` is refused rather than clamped: every
    sender sees the ledger before it records the intent (the follower reads the owner version
    that listed it, the reconciler scans, then the marker stamps), so such a PDLI comes from
    a broken or hostile sender, and the operator should see it dead-lettered. Taken as is, it
    would also move the incarnation rule's bound past the one `marked_at_ms` proves; and 0
    in `marked_at_ms` (no stamp) with a `seen_at_ms` is refused the same way.
    """
    if seen_at < 0:
        raise InvalidArgument("seen_at_ms", f"must be non-negative, got {seen_at}")
    if seen_at > marked_at:
        raise InvalidArgument(
            "seen_at_ms", f"{seen_at} is later than marked_at_ms {marked_at}: never sent so"
        )
    return seen_at


def _ledger_id(pdli: _pb.PendingDeleteLedgerInfo) -> int:
    if not pdli.HasField("ledger_id"):
        raise InvalidArgument("ledger_id", "missing")
    if not 0 <= pdli.ledger_id <= _MAX_LEDGER_ID:
        raise InvalidArgument("ledger_id", f"must be non-negative, got {pdli.ledger_id}")
    return pdli.ledger_id


def _enum(table: Mapping[int, E], value: int, field: str) -> E:
    if value not in table:
        raise InvalidArgument(field, f"unknown or unspecified value {value}")
    return table[value]


OwnerNames = tuple[str | None, str | None, str | None, str | None, str]


def _owner(pdli: _pb.PendingDeleteLedgerInfo, component: Component) -> OwnerNames:
    """(ml_name, ml_path, cursor, schema_id, owner_path) for the PDLI's component."""
    return _owner_names(
        component, pdli.managed_ledger_name, pdli.topic_name, pdli.cursor_name, pdli.schema_id
    )


# A stream of PDLIs names few owners, each many times: validating each name once saves most
# of the validation cost. Only successes are cached (an error is raised, never stored).
# Every name must be canonical (`services.metadata.pulsar_names`): the owner path read by the
# in-use check and every target built later (ledger metadata match, object identity,
# filesystem path) derive from the same accepted strings, so no alias can be checked under
# one owner and deleted under another.
@functools.lru_cache(maxsize=65_536)
def _owner_names(
    component: Component, ml: str, topic: str, cursor_name: str, schema: str
) -> OwnerNames:
    if component is Component.SCHEMA:
        if not schema:
            raise InvalidArgument("schema_id", "missing (required for SCHEMA_STORAGE)")
        schema_id = _named(check_schema_id, schema, "schema_id")
        return None, None, None, schema_id, schema_path(schema_id)
    if not ml:
        raise InvalidArgument("managed_ledger_name", "missing")
    ml_name = _named(check_managed_ledger_name, ml, "managed_ledger_name")
    if topic:
        topic_ml = _named(managed_ledger_name, topic, "topic_name")
        if topic_ml != ml_name:
            raise InvalidArgument(
                "topic_name", f"{topic!r} is not the topic of managed ledger {ml_name!r}"
            )
    ml_path = managed_ledger_path(ml_name)
    if component is Component.MANAGED_LEDGER:
        return ml_name, ml_path, None, None, ml_path
    if not cursor_name:
        raise InvalidArgument("cursor_name", f"missing (required for {_pb_name(component)})")
    cursor = _named(check_cursor_name, cursor_name, "cursor_name")
    return ml_name, ml_path, cursor, None, cursor_path(ml_name, cursor)


_COMPONENT_NAMES = {c: _pb.LedgerComponent.Name(n) for n, c in _COMPONENTS.items()}  # type: ignore[arg-type]


def _pb_name(component: Component) -> str:
    return _COMPONENT_NAMES[component]


def _property_owner(
    pdli: _pb.PendingDeleteLedgerInfo,
    tier: Tier,
    component: Component,
    ml_name: str | None,
    cursor: str | None,
) -> str | None:
    """For a property-owned ledger: check what only these kinds require, and return the
    canonical topic name its custom metadata must carry (None for the other kinds)."""
    if not component.by_property:
        return None
    name = _pb_name(component)
    if tier is not Tier.BOOKKEEPER:
        raise InvalidArgument("ledger_type", f"{name} ledgers are never offloaded: LEDGER only")
    if pdli.HasField("offload_context"):
        raise InvalidArgument("offload_context", f"must be absent for {name}")
    if component is Component.COMPACTED and cursor != COMPACTION_CURSOR:
        raise InvalidArgument(
            "cursor_name", f"must be {COMPACTION_CURSOR!r} for COMPACTED_LEDGER, got {cursor!r}"
        )
    if not pdli.topic_name:
        raise InvalidArgument("topic_name", f"missing (required for {name})")
    assert ml_name is not None  # `_owner_names` checked the topic names this ML
    # The canonical form, as `TopicName.toString()` writes it into the ledger's metadata.
    return str(topic_from_managed_ledger_name(ml_name))


def _named(check: Callable[[str], str], value: str, field: str) -> str:
    """Run a `services.metadata` name check, re-labelling its error with the PDLI field."""
    try:
        return check(value)
    except InvalidArgument as e:
        raise InvalidArgument(field, e.problem) from e


def _offload(
    pdli: _pb.PendingDeleteLedgerInfo, tier: Tier, component: Component
) -> OffloadTarget | None:
    if not pdli.HasField("offload_context"):
        if tier is Tier.OFFLOAD:
            raise InvalidArgument("offload_context", "missing (required for OFFLOAD_LEDGER)")
        return None
    ctx = pdli.offload_context
    if ctx.uuid_msb == 0 and ctx.uuid_lsb == 0:
        if tier is Tier.OFFLOAD:
            raise InvalidArgument("offload_context.uuid_msb", "no offload uuid (both halves 0)")
        return None
    if tier is Tier.OFFLOAD and component is not Component.MANAGED_LEDGER:
        raise InvalidArgument("component", "only managed-ledger data ledgers are offloaded")
    # A context written by Pulsar 2.1 has neither a driver name nor properties: the operator's
    # default offloader applies (`OffloadInspector`). A name missing beside properties is not
    # something any Pulsar version wrote.
    if tier is Tier.OFFLOAD and not ctx.driver_name and ctx.driver_metadata:
        raise InvalidArgument("offload_context.driver_name", "missing beside driver_metadata")
    return OffloadTarget(
        uuid=uuid_from_bits(ctx.uuid_msb, ctx.uuid_lsb),
        driver_name=ctx.driver_name,
        driver_metadata=dict(ctx.driver_metadata),
    )
