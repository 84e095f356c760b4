"""Reference owners: which znode holds a ledger's reference, and how to unlink from it.

Three owners (docs/design.md §2, formats reference §5–§6):
- MANAGED_LEDGER: `/managed-ledgers/<ml>`, the `ledgerInfo` list (with offload contexts);
- MANAGED_CURSOR: `/managed-ledgers/<ml>/<cursor>`, its `cursorsLedgerId`; unlinking writes
  the cursor info with the replacement id the request names (-1 by default);
- SCHEMA_STORAGE: `/schemas/<id>`, the locator's `index` (and `info`, the latest version);
- COMPACTED_LEDGER: the `__compaction` cursor znode, its `CompactedTopicLedger` mark-delete
  property; the marker writes it only while that cursor is closed (its properties are then
  in the znode; while it is active they are in its cursor ledger);
- DELAYED_INDEX_BUCKET: the subscription's cursor znode, a `#pulsar.internal.delayed.bucket_*`
  cursor property; unlinking removes that entry.
Paths and codecs come from `services.metadata`; this module only decides what is referenced
and what the znode looks like without the unlinked ledgers.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from services.core.errors import FailedPrecondition, InvalidArgument
from services.metadata import (
    CompressionType,
    cursor_path,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
    managed_ledger_name,
    managed_ledger_path,
    schema_id_of,
    schema_path,
    topic_from_managed_ledger_name,
)
from services.metadata.cursor_properties import (
    COMPACTED_TOPIC_LEDGER,
    bucket_entries,
    parse_ledger_id,
    persisted_compacted_ledger,
    property_ledger_ids,
)
from services.metadata.pulsar_formats import SHADOW_SOURCE
from tombstone.formats import managed_ledger_pb2 as _ml
from tombstone.formats import schema_pb2 as _schema
from tombstone.v1 import pending_delete_pb2 as _pd

LEDGER_ONLY = (_pd.LEDGER,)
COMPACTION_CURSOR = "__compaction"
"""The cursor whose mark-delete properties name a topic's compacted ledger."""
_ML_COMPONENTS = (
    _pd.MANAGED_LEDGER,
    _pd.MANAGED_CURSOR,
    _pd.COMPACTED_LEDGER,
    _pd.DELAYED_INDEX_BUCKET,
)


@dataclass(frozen=True)
class Owner:
    """Who references the ledgers of one Mark call, and where that reference lives."""

    component: _pd.LedgerComponent.ValueType
    path: str
    """The znode whose content lists the ledgers."""
    topic_name: str = ""
    managed_ledger_name: str = ""
    cursor_name: str = ""
    schema_id: str = ""

    def stamp(self, pdli: _pd.PendingDeleteLedgerInfo) -> None:
        """Fill the owner fields of a PDLI."""
        pdli.component = self.component
        pdli.topic_name = self.topic_name
        pdli.managed_ledger_name = self.managed_ledger_name
        pdli.cursor_name = self.cursor_name
        pdli.schema_id = self.schema_id


def _renamed(field_name: str, exc: InvalidArgument) -> InvalidArgument:
    return InvalidArgument(field_name, exc.problem)


def _ml_name(topic_name: str, ml_name: str) -> str:
    """The ML name from the request: given directly, or derived from the topic; both agree."""
    derived = ""
    if topic_name:
        try:
            derived = managed_ledger_name(topic_name)
        except InvalidArgument as exc:
            raise _renamed("topic_name", exc) from exc
    if ml_name and derived and ml_name != derived:
        raise InvalidArgument(
            "managed_ledger_name", f"{ml_name!r} is not the managed ledger of {topic_name!r}"
        )
    name = ml_name or derived
    if not name:
        raise InvalidArgument("managed_ledger_name", "must not be empty (or give topic_name)")
    return name


@functools.lru_cache(maxsize=4096)
def _topic_of(ml_name: str, topic_name: str) -> str:
    # Cached: decoding the name is a noticeable share of a small Mark call.
    if topic_name:
        return topic_name
    try:
        return str(topic_from_managed_ledger_name(ml_name))
    except InvalidArgument as exc:
        raise _renamed("managed_ledger_name", exc) from exc


def resolve_owner(
    component: int, *, topic_name: str, ml_name: str, cursor_name: str, schema_id: str
) -> Owner:
    """Validate the owner fields of a request and find the owner's znode."""
    if component == _pd.SCHEMA_STORAGE:
        return _schema_owner(topic_name, schema_id)
    if component not in _ML_COMPONENTS:
        raise InvalidArgument("component", f"must be a known ledger component, got {component}")
    name = _ml_name(topic_name, ml_name)
    topic = _topic_of(name, topic_name)
    kind = _pd.LedgerComponent.Name(component)  # type: ignore[arg-type]
    if component == _pd.COMPACTED_LEDGER:
        cursor_name = cursor_name or COMPACTION_CURSOR
        if cursor_name != COMPACTION_CURSOR:
            raise InvalidArgument(
                "cursor_name", f"must be {COMPACTION_CURSOR!r} for COMPACTED_LEDGER"
            )
    try:
        if component == _pd.MANAGED_LEDGER:
            return Owner(_pd.MANAGED_LEDGER, managed_ledger_path(name), topic, name)
        if not cursor_name:
            raise InvalidArgument("cursor_name", f"a {kind} request needs the cursor name")
        path = cursor_path(name, cursor_name)
    except InvalidArgument as exc:
        if exc.field == "cursor_name":
            raise
        raise _renamed("managed_ledger_name", exc) from exc
    return Owner(
        _pd.LedgerComponent.ValueType(component), path, topic, name, cursor_name=cursor_name
    )


def _schema_owner(topic_name: str, schema_id: str) -> Owner:
    derived = ""
    if topic_name:
        try:
            derived = schema_id_of(topic_name)
        except InvalidArgument as exc:
            raise _renamed("topic_name", exc) from exc
    if schema_id and derived and schema_id != derived:
        raise InvalidArgument("schema_id", f"{schema_id!r} is not the schema of {topic_name!r}")
    sid = schema_id or derived
    if not sid:
        raise InvalidArgument("schema_id", "must not be empty (or give topic_name)")
    try:
        path = schema_path(sid)
    except InvalidArgument as exc:
        raise _renamed("schema_id", exc) from exc
    return Owner(_pd.SCHEMA_STORAGE, path, topic_name, schema_id=sid)


@dataclass(frozen=True)
class LedgerRef:
    """One referenced ledger and the tiers that need a PDLI."""

    ledger_id: int
    tiers: tuple[_pd.LedgerType.ValueType, ...] = LEDGER_ONLY
    offload: _pd.OffloadContext | None = None


@dataclass(frozen=True)
class Unlink:
    """What the owner znode becomes: new content, or deleted (`data is None`)."""

    data: bytes | None


class OwnerSnapshot(Protocol):
    """An owner znode as read at one version."""

    def reference(self, ledger_id: int) -> LedgerRef | None:
        """The reference to `ledger_id`, or None if this owner does not reference it."""
        ...

    def blocked(self, ledger_ids: Collection[int]) -> dict[int, str]:
        """Referenced ledgers that cannot be unlinked together as asked, with the reason."""
        ...

    def without(self, ledger_ids: Collection[int], *, new_cursor_ledger_id: int) -> Unlink:
        """The znode once `ledger_ids` (all referenced) are unlinked."""
        ...

    def marker_write_refusal(self) -> str | None:
        """Why the marker may not write this owner (FAILED_PRECONDITION), or None."""
        ...


@dataclass(frozen=True)
class EncodingOptions:
    """How the marker re-encodes ML and cursor znodes it writes."""

    compression: CompressionType = CompressionType.NONE
    threshold_bytes: int = 16384


def tiers_of(info: _ml.ManagedLedgerInfo.LedgerInfo) -> LedgerRef:
    """LEDGER unless BookKeeper's copy is already deleted; OFFLOAD_LEDGER whenever the offload
    context carries a uuid, complete or not (docs/design.md §2)."""
    if not info.HasField("offloadContext"):
        return LedgerRef(info.ledgerId)
    ctx = info.offloadContext
    tiers: list[_pd.LedgerType.ValueType] = []
    if not ctx.bookkeeperDeleted:
        tiers.append(_pd.LEDGER)
    if ctx.HasField("uidMsb"):
        tiers.append(_pd.OFFLOAD_LEDGER)
    return LedgerRef(info.ledgerId, tuple(tiers), offload_context(ctx))


def offload_context(ctx: _ml.OffloadContext) -> _pd.OffloadContext:
    out = _pd.OffloadContext(
        uuid_msb=ctx.uidMsb,
        uuid_lsb=ctx.uidLsb,
        complete=ctx.complete,
        bookkeeper_deleted=ctx.bookkeeperDeleted,
        timestamp_ms=ctx.timestamp,
    )
    if ctx.HasField("driverMetadata"):
        out.driver_name = ctx.driverMetadata.name
        for kv in ctx.driverMetadata.properties:
            out.driver_metadata[kv.key] = kv.value
    return out


@dataclass
class ManagedLedgerSnapshot:
    info: _ml.ManagedLedgerInfo
    encoding: EncodingOptions = field(default_factory=EncodingOptions)

    def __post_init__(self) -> None:
        self._refs = {li.ledgerId: li for li in self.info.ledgerInfo}

    def reference(self, ledger_id: int) -> LedgerRef | None:
        info = self._refs.get(ledger_id)
        return None if info is None else tiers_of(info)

    def marker_write_refusal(self) -> str | None:
        return None

    def blocked(self, ledger_ids: Collection[int]) -> dict[int, str]:
        return {}

    def without(self, ledger_ids: Collection[int], *, new_cursor_ledger_id: int) -> Unlink:
        gone = set(ledger_ids)
        info = _ml.ManagedLedgerInfo()
        info.CopyFrom(self.info)
        del info.ledgerInfo[:]
        info.ledgerInfo.extend(li for li in self.info.ledgerInfo if li.ledgerId not in gone)
        data = encode_managed_ledger_info(
            info,
            compression=self.encoding.compression,
            threshold_bytes=self.encoding.threshold_bytes,
        )
        return Unlink(data)


@dataclass
class CursorSnapshot:
    info: _ml.ManagedCursorInfo
    encoding: EncodingOptions = field(default_factory=EncodingOptions)

    def reference(self, ledger_id: int) -> LedgerRef | None:
        current = self.info.cursorsLedgerId
        return LedgerRef(ledger_id) if current >= 0 and current == ledger_id else None

    def marker_write_refusal(self) -> str | None:
        return None

    def blocked(self, ledger_ids: Collection[int]) -> dict[int, str]:
        return {}

    def without(self, ledger_ids: Collection[int], *, new_cursor_ledger_id: int) -> Unlink:
        # Only cursorsLedgerId changes: the mark-delete position and properties stay as read.
        info = _ml.ManagedCursorInfo()
        info.CopyFrom(self.info)
        info.cursorsLedgerId = new_cursor_ledger_id
        data = encode_cursor_info(
            info,
            compression=self.encoding.compression,
            threshold_bytes=self.encoding.threshold_bytes,
        )
        return Unlink(data)


@dataclass
class SchemaSnapshot:
    locator: _schema.SchemaLocator

    def __post_init__(self) -> None:
        self._index = {entry.position.ledgerId for entry in self.locator.index}
        self._latest = self.locator.info.position.ledgerId

    def reference(self, ledger_id: int) -> LedgerRef | None:
        referenced = ledger_id in self._index or ledger_id == self._latest
        return LedgerRef(ledger_id) if referenced else None

    def marker_write_refusal(self) -> str | None:
        return None

    def blocked(self, ledger_ids: Collection[int]) -> dict[int, str]:
        # The latest version (`info`) may only go together with every other version: the
        # locator is then deleted, as Pulsar does when it deletes a topic's schema.
        asked = set(ledger_ids)
        if self._latest in asked and not (self._index | {self._latest}) <= asked:
            return {self._latest: "holds the latest schema version; unlink it with all others"}
        return {}

    def without(self, ledger_ids: Collection[int], *, new_cursor_ledger_id: int) -> Unlink:
        gone = set(ledger_ids)
        if (self._index | {self._latest}) <= gone:
            return Unlink(None)
        locator = _schema.SchemaLocator()
        locator.CopyFrom(self.locator)
        del locator.index[:]
        locator.index.extend(e for e in self.locator.index if e.position.ledgerId not in gone)
        return Unlink(encode_schema_locator(locator))


def _encode_cursor(info: _ml.ManagedCursorInfo, encoding: EncodingOptions) -> bytes:
    return encode_cursor_info(
        info, compression=encoding.compression, threshold_bytes=encoding.threshold_bytes
    )


@dataclass
class BucketSnapshot:
    """A subscription's cursor znode as the owner of its delayed-delivery bucket snapshots
    (`BucketDelayedDeliveryTracker`: `cursorProperties`, always persisted in the znode)."""

    info: _ml.ManagedCursorInfo
    encoding: EncodingOptions = field(default_factory=EncodingOptions)

    def __post_init__(self) -> None:
        self._named = property_ledger_ids(self.info)

    def reference(self, ledger_id: int) -> LedgerRef | None:
        # Any property naming the id counts, as for the verifier: never a false "free".
        return LedgerRef(ledger_id) if ledger_id in self._named else None

    def marker_write_refusal(self) -> str | None:
        return None

    def blocked(self, ledger_ids: Collection[int]) -> dict[int, str]:
        # Only a bucket-snapshot entry is the marker's to remove; any other property naming
        # the id is not a reference it knows how to unlink.
        return {
            i: "named by a cursor property that is not a delayed-delivery bucket key"
            for i in ledger_ids
            if not bucket_entries(self.info, i) or _other_property_names(self.info, i)
        }

    def without(self, ledger_ids: Collection[int], *, new_cursor_ledger_id: int) -> Unlink:
        gone = {key for i in ledger_ids for key in bucket_entries(self.info, i)}
        info = _ml.ManagedCursorInfo()
        info.CopyFrom(self.info)
        del info.cursorProperties[:]
        info.cursorProperties.extend(p for p in self.info.cursorProperties if p.name not in gone)
        return Unlink(_encode_cursor(info, self.encoding))


def _other_property_names(info: _ml.ManagedCursorInfo, ledger_id: int) -> bool:
    """Whether something besides a bucket-snapshot entry names `ledger_id`."""
    if any(p.value == ledger_id for p in info.properties):
        return True
    buckets = set(bucket_entries(info, ledger_id))
    return any(
        p.name not in buckets and parse_ledger_id(p.value) == ledger_id
        for p in info.cursorProperties
    )


@dataclass
class CompactionSnapshot:
    """The `__compaction` cursor znode as the owner of the topic's compacted ledger
    (`AbstractTwoPhaseCompactor.phaseTwo` → `markDelete(pos, {CompactedTopicLedger: id})`).

    While the cursor is active (`cursorsLedgerId >= 0`), its live properties are in its
    cursor ledger: a ledger not below the persisted `CompactedTopicLedger` may be the live
    one, so it counts as referenced (never as free), and the marker does not write the znode.
    """

    info: _ml.ManagedCursorInfo
    encoding: EncodingOptions = field(default_factory=EncodingOptions)

    def __post_init__(self) -> None:
        self._named = property_ledger_ids(self.info)
        self._persisted = persisted_compacted_ledger(self.info)
        self._active = self.info.cursorsLedgerId >= 0

    def reference(self, ledger_id: int) -> LedgerRef | None:
        if ledger_id in self._named:
            return LedgerRef(ledger_id)
        unknown = self._active and (self._persisted is None or ledger_id >= self._persisted)
        return LedgerRef(ledger_id) if unknown else None

    def marker_write_refusal(self) -> str | None:
        if not self._active:
            return None
        return (
            f"the __compaction cursor is active (cursor ledger {self.info.cursorsLedgerId}): "
            "its properties are in its cursor ledger, not in the znode; use CALLER_WRITES "
            "from the broker that owns the topic, or mark once the cursor is closed; nothing "
            "was sent or unlinked"
        )

    def blocked(self, ledger_ids: Collection[int]) -> dict[int, str]:
        return {
            i: "named by a cursor property other than CompactedTopicLedger"
            for i in ledger_ids
            if any(p.value == i and p.name != COMPACTED_TOPIC_LEDGER for p in self.info.properties)
            or any(parse_ledger_id(p.value) == i for p in self.info.cursorProperties)
        }

    def without(self, ledger_ids: Collection[int], *, new_cursor_ledger_id: int) -> Unlink:
        gone = set(ledger_ids)
        info = _ml.ManagedCursorInfo()
        info.CopyFrom(self.info)
        del info.properties[:]
        info.properties.extend(
            p
            for p in self.info.properties
            if not (p.name == COMPACTED_TOPIC_LEDGER and p.value in gone)
        )
        return Unlink(_encode_cursor(info, self.encoding))


def parse_snapshot(
    owner: Owner, data: bytes, encoding: EncodingOptions = EncodingOptions()
) -> OwnerSnapshot:
    """Decode the owner znode (`CorruptMetadata` naming the path if it does not decode)."""
    if owner.component == _pd.MANAGED_LEDGER:
        info = decode_managed_ledger_info(data, path=owner.path)
        source = next((p.value for p in info.properties if p.key == SHADOW_SOURCE), None)
        if source is not None:
            # PIP-180: a shadow's list is a copy of its source's, whose trims delete them.
            raise FailedPrecondition(
                f"{owner.path} is a shadow topic of {source}: its ledgers are the source's, "
                "mark them on the source; nothing was sent or unlinked"
            )
        return ManagedLedgerSnapshot(info, encoding)
    if owner.component == _pd.MANAGED_CURSOR:
        return CursorSnapshot(decode_cursor_info(data, path=owner.path), encoding)
    if owner.component == _pd.COMPACTED_LEDGER:
        return CompactionSnapshot(decode_cursor_info(data, path=owner.path), encoding)
    if owner.component == _pd.DELAYED_INDEX_BUCKET:
        return BucketSnapshot(decode_cursor_info(data, path=owner.path), encoding)
    return SchemaSnapshot(decode_schema_locator(data, path=owner.path))
