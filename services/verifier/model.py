"""The verifier's domain values: a validated deletion target and the verdict about it.

Plain frozen dataclasses with no gRPC or protobuf types, so that the decision can be tested
with fakes and the servicer is the only place that converts to and from the wire.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Tier(enum.Enum):
    """Which copy of the ledger a PDLI deletes."""

    BOOKKEEPER = "bookkeeper"
    OFFLOAD = "offload"


class Component(enum.Enum):
    """Which reference owner lists the ledger."""

    MANAGED_LEDGER = "managed-ledger"
    CURSOR = "cursor"
    SCHEMA = "schema"
    COMPACTED = "compacted-ledger"
    """A compacted-topic ledger: the `CompactedTopicLedger` property of `__compaction`."""
    BUCKET = "delayed-index-bucket"
    """A delayed-delivery bucket snapshot: a `#pulsar.internal.delayed.bucket_*` cursor
    property of its subscription's cursor."""

    @property
    def by_property(self) -> bool:
        """Referenced by a property of a cursor znode rather than by a list or an id field."""
        return self in (Component.COMPACTED, Component.BUCKET)

    @property
    def cursor_owned(self) -> bool:
        """The owner znode is a cursor znode (`/managed-ledgers/<ml>/<cursor>`)."""
        return self is Component.CURSOR or self.by_property


class Source(enum.Enum):
    """Who asked for the deletion; reconciler requests are checked more strictly."""

    BROKER = "broker"
    RECONCILER = "reconciler"
    OPERATOR = "operator"
    OBSERVED = "observed"
    """The marker's follower saw an unmodified broker unlink the ledger."""
    UNSPECIFIED = "unspecified"


@dataclass(frozen=True, slots=True)
class OffloadTarget:
    """The offloaded copy a PDLI names: its upload uuid and where the driver put it."""

    uuid: str
    driver_name: str
    driver_metadata: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Target:
    """A validated PDLI: one tier of one ledger of one reference owner."""

    ledger_id: int
    tier: Tier
    component: Component
    owner_path: str
    """The znode that references the ledger: ML, cursor or schema locator."""
    ml_name: str | None = None
    ml_path: str | None = None
    """The ML znode (data and cursor ledgers): its existence means "the topic exists"."""
    cursor: str | None = None
    schema_id: str | None = None
    topic: str | None = None
    """Property-owned ledgers only: the canonical topic name their custom metadata carries."""
    offload: OffloadTarget | None = None
    fence_token: int | None = None
    source: Source = Source.BROKER
    cluster: str = ""
    marked_at_ms: int = 0
    """When the marker recorded the intent (its clock), ms since the epoch; 0 when unset."""
    seen_at_ms: int = 0
    """A time the sender saw the ledger as the one it names (never after `marked_at_ms`);
    0 when unset."""
    believed_key: int = 0
    """Identity of this (ledger, tier, owner) in the believed set (see `believed.identity_key`)."""
    signed: bool = False
    """A valid signature of a trusted marker key covers this PDLI (docs/design.md §4.7)."""


class Decision(enum.Enum):
    DELETE = "delete"
    SKIP = "skip"
    RETRY = "retry"


class SkipReason(enum.Enum):
    IN_USE = "in_use"
    MISMATCH = "mismatch"
    NOT_FOUND = "not_found"
    INVALID = "invalid"
    FORGED = "forged"
    """Unsigned or badly signed where signatures are required."""
    UNSUPPORTED = "unsupported"
    """Well-formed, but nothing this verifier can decide or act on."""
    FOREIGN = "foreign"
    """The artifact may be another cluster's (shared BookKeeper): never deleted here."""


@dataclass(frozen=True, slots=True)
class BookKeeperEvidence:
    """Delete the ledger metadata znode `path` at exactly `version`."""

    path: str
    version: int
    length_bytes: int | None = None
    """The ledger's length from its metadata; None unless the ledger is CLOSED (unknown)."""


@dataclass(frozen=True, slots=True)
class OffloadEvidence:
    """Delete exactly these objects (blob store) or this path (filesystem offloader)."""

    driver_name: str
    bucket: str = ""
    keys: tuple[str, ...] = ()
    filesystem_path: str = ""
    size_bytes: int | None = None
    """Total size of the objects found; None when any size is unknown (or a filesystem copy)."""
    endpoint: str = ""
    """Canonical endpoint the offload record names; empty: it names none, the objects are at
    the configured endpoint (or a filesystem copy)."""
    region: str = ""
    """Region the offload record names; empty: the configured region (or a filesystem copy)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer for one PDLI. `code` is a short stable label for metrics and logs."""

    decision: Decision
    code: str
    reason: str
    skip_reason: SkipReason | None = None
    bookkeeper: BookKeeperEvidence | None = None
    offload: OffloadEvidence | None = None
    believed: bool = False
    differences: tuple[Difference, ...] = field(default=())
    """For MISMATCH: what differed (the security log line names each)."""

    @property
    def label(self) -> str:
        """`delete`, `skip_in_use`, `retry`...: the metric label of the decision."""
        if self.skip_reason is not None:
            return f"skip_{self.skip_reason.value}"
        return self.decision.value


@dataclass(frozen=True, slots=True)
class Difference:
    """One field of the stored identity that differs from the PDLI."""

    field: str
    expected: str | None
    actual: str | None


def delete(
    code: str,
    reason: str,
    *,
    bookkeeper: BookKeeperEvidence | None = None,
    offload: OffloadEvidence | None = None,
    believed: bool = False,
) -> Verdict:
    return Verdict(
        Decision.DELETE, code, reason, bookkeeper=bookkeeper, offload=offload, believed=believed
    )


def skip(
    reason_kind: SkipReason,
    code: str,
    reason: str,
    *,
    differences: tuple[Difference, ...] = (),
) -> Verdict:
    return Verdict(Decision.SKIP, code, reason, skip_reason=reason_kind, differences=differences)


def retry(code: str, reason: str) -> Verdict:
    return Verdict(Decision.RETRY, code, reason)
