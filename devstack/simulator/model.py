"""The ground truth of a simulated cluster: everything the writer puts in ZooKeeper and S3.

Records are plain frozen dataclasses so that tests can compare a model with what the
metadata stores read back (`readback.read_cluster`) with `==`.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from devstack.simulator.spec import ClusterSpec
from services.metadata import LedgerMetadata, LedgerState, TopicName
from services.metadata.paths import LedgerLayout

# The Pulsar custom-metadata keys (reference §4).
APPLICATION = "application"
COMPONENT = "component"
ML_KEY = "pulsar/managed-ledger"
CURSOR_KEY = "pulsar/cursor"
SCHEMA_KEY = "pulsar/schemaId"
SHADOW_SOURCE = "PULSAR.SHADOW_SOURCE"


class LedgerKind(enum.StrEnum):
    DATA = "data"
    CURSOR = "cursor"
    SCHEMA = "schema"
    FOREIGN = "foreign"  # no Pulsar custom metadata


class OrphanKind(enum.StrEnum):
    """Why a planted ledger or object is there. `deletable` says if removing it is right."""

    UNLISTED_DATA = "unlisted-data"
    DELETED_TOPIC = "deleted-topic"
    STALE_CURSOR = "stale-cursor"
    UNLISTED_SCHEMA = "unlisted-schema"
    UNREFERENCED_OFFLOAD = "unreferenced-offload"
    BK_AFTER_OFFLOAD = "bk-after-offload"
    YOUNG = "young"
    NO_PULSAR_METADATA = "no-pulsar-metadata"
    SHADOW_REFERENCED = "shadow-referenced"
    OTHER_CLUSTER_OBJECTS = "other-cluster-objects"
    # Legacy artifacts (`LegacyPlan`); the listed ones are deletable once their owner unlinks
    # them, and then only with a proof of ownership.
    OPEN_CURSOR_UNSUBSCRIBED = "open-cursor-unsubscribed"
    PRE_2_2_LEDGER = "pre-2.2-ledger"
    OFFLOAD_2_1 = "offload-2.1"
    OBJECTS_PRE_2_10 = "objects-pre-2.10"

    @property
    def deletable(self) -> bool:
        return self in _DELETABLE


_DELETABLE = frozenset(
    {
        OrphanKind.UNLISTED_DATA,
        OrphanKind.DELETED_TOPIC,
        OrphanKind.STALE_CURSOR,
        OrphanKind.UNLISTED_SCHEMA,
        OrphanKind.UNREFERENCED_OFFLOAD,
        OrphanKind.BK_AFTER_OFFLOAD,
        OrphanKind.OPEN_CURSOR_UNSUBSCRIBED,
    }
)


@dataclass(frozen=True)
class Offload:
    """A ledger's OffloadContext, and where its copy lives."""

    uuid: str
    complete: bool
    bookkeeper_deleted: bool
    timestamp: int
    driver_name: str
    driver_properties: tuple[tuple[str, str], ...]
    bucket: str
    """The bucket (S3) or storage base path (filesystem) the driverMetadata names; '' for a
    2.1 context (no driverMetadata: the operator's default bucket holds the objects)."""


@dataclass(frozen=True)
class Ledger:
    """One BookKeeper ledger: its metadata (as its znode holds it) and the simulator's facts."""

    metadata: LedgerMetadata
    kind: LedgerKind
    owner: str
    """ML name (data and cursor ledgers), schema id (schema ledgers), '' (foreign)."""
    cursor: str | None
    in_bookkeeper: bool
    """False when the BookKeeper copy is gone (`bookkeeperDeleted`, or only objects remain)."""
    referenced: bool
    """Listed by an ML, a cursor or a schema locator."""
    young: bool = False
    """Written after `ClusterModel.young_since_ms`: too young for any age window."""
    path_layout: LedgerLayout = LedgerLayout.HIERARCHICAL
    """The layout whose path the znode sits at (hybrid when Pulsar >= 2.10 wrote it)."""

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    @property
    def state(self) -> LedgerState:
        return self.metadata.state

    @property
    def custom_metadata(self) -> Mapping[str, bytes]:
        return self.metadata.custom_metadata

    @property
    def entries(self) -> int:
        return self.metadata.last_entry_id + 1


@dataclass(frozen=True)
class LedgerInfo:
    """One entry of a managed ledger's list."""

    ledger_id: int
    entries: int | None
    size: int | None
    timestamp: int
    offload: Offload | None = None


@dataclass(frozen=True)
class ManagedLedger:
    name: str
    """The ML name, `tenant/ns/persistent/<encoded local name>`."""
    topic: str
    """`persistent://tenant/ns/<local name>`."""
    ledgers: tuple[LedgerInfo, ...]
    properties: tuple[tuple[str, str], ...] = ()
    empty_znode: bool = False
    """A new topic: the znode holds 0 bytes (parsed as an empty ManagedLedgerInfo)."""

    @property
    def ledger_ids(self) -> tuple[int, ...]:
        return tuple(info.ledger_id for info in self.ledgers)

    @property
    def shadow_source(self) -> str | None:
        return dict(self.properties).get(SHADOW_SOURCE)


@dataclass(frozen=True)
class Cursor:
    ml_name: str
    name: str
    cursors_ledger_id: int
    """-1 for a cleanly closed cursor (no cursor ledger)."""
    mark_delete_ledger_id: int
    mark_delete_entry_id: int
    last_active: int


@dataclass(frozen=True)
class SchemaVersion:
    version: int
    ledger_id: int
    entry_id: int
    hash: bytes


@dataclass(frozen=True)
class Schema:
    schema_id: str
    """`tenant/ns/<encoded base topic>`: no domain, no partition suffix."""
    versions: tuple[SchemaVersion, ...]

    @property
    def ledger_ids(self) -> tuple[int, ...]:
        return tuple(v.ledger_id for v in self.versions)


@dataclass(frozen=True)
class PartitionedTopic:
    tenant: str
    namespace: str
    local_name: str
    partitions: int

    @property
    def topic(self) -> str:
        return f"persistent://{self.tenant}/{self.namespace}/{self.local_name}"


@dataclass(frozen=True)
class OffloadObject:
    """One S3 object written by the blob-store offloader (data or index)."""

    bucket: str
    key: str
    role: str
    """`data` or `index` (the `role` user metadata)."""
    ledger_id: int
    uuid: str
    ml_name: str
    cluster_name: str
    user_metadata: Mapping[str, str]
    source: Ledger = field(compare=False, repr=False)
    """The ledger whose copy this is (its metadata goes into the index object)."""


@dataclass(frozen=True)
class Planted:
    """An orphan or look-alike put there on purpose, and how to recognise it."""

    kind: OrphanKind
    ledger_id: int | None = None
    object_keys: tuple[str, ...] = ()
    ml_name: str = ""
    note: str = ""

    @property
    def deletable(self) -> bool:
        return self.kind.deletable


@dataclass
class ClusterModel:
    """Everything written, keyed for lookups. Built by `generate.build_model`."""

    spec: ClusterSpec
    instance_id: str
    bookies: tuple[str, ...]
    ledgers: dict[int, Ledger] = field(default_factory=dict)
    managed_ledgers: dict[str, ManagedLedger] = field(default_factory=dict)
    cursors: dict[tuple[str, str], Cursor] = field(default_factory=dict)
    schemas: dict[str, Schema] = field(default_factory=dict)
    partitioned_topics: dict[str, PartitionedTopic] = field(default_factory=dict)
    objects: dict[str, OffloadObject] = field(default_factory=dict)
    planted: list[Planted] = field(default_factory=list)
    young_since_ms: int | None = None
    """Server time (ms) between the last old and the first young znode; set by the writer.

    Every ledger with `young=False` has a znode ctime < this, every young one >= this. A test
    that runs an age window W makes "old" mean exactly the old ledgers by using the clock
    `now = young_since_ms + W` (see `clock_for_window`).
    """

    def clock_for_window(self, window_ms: int) -> int:
        """The injected 'now' under which an age window of `window_ms` splits old from young."""
        if self.young_since_ms is None:
            raise ValueError("the model has not been written yet: no ctime boundary")
        return self.young_since_ms + window_ms

    def bookkeeper_ledgers(self) -> Iterator[Ledger]:
        """Ledgers with a znode under the ledgers root, in id order (the write order)."""
        return (led for _, led in sorted(self.ledgers.items()) if led.in_bookkeeper)

    def planted_of(self, kind: OrphanKind) -> list[Planted]:
        return [p for p in self.planted if p.kind == kind]

    def offload_of(self, ledger_id: int) -> Offload | None:
        """The offload context a (non-shadow) ML lists for the ledger, if any."""
        for ml in self.managed_ledgers.values():
            if ml.shadow_source:
                continue
            for info in ml.ledgers:
                if info.ledger_id == ledger_id:
                    return info.offload
        return None

    def object_keys_of(self, ledger_id: int) -> tuple[str, ...]:
        """Keys of every object written for the ledger (any uuid), sorted."""
        return tuple(sorted(k for k, o in self.objects.items() if o.ledger_id == ledger_id))

    def referenced_ledger_ids(self) -> set[int]:
        """Ids listed by an ML, a cursor or a schema locator."""
        ids: set[int] = set()
        for ml in self.managed_ledgers.values():
            ids.update(ml.ledger_ids)
        ids.update(c.cursors_ledger_id for c in self.cursors.values() if c.cursors_ledger_id >= 0)
        for schema in self.schemas.values():
            ids.update(schema.ledger_ids)
        return ids

    def counts(self) -> dict[str, int]:
        """Headline figures for summaries."""
        kinds = Counter(led.kind.value for led in self.ledgers.values())
        in_bk = sum(1 for led in self.ledgers.values() if led.in_bookkeeper)
        offloaded = sum(
            1 for ml in self.managed_ledgers.values() for info in ml.ledgers if info.offload
        )
        return {
            "managed_ledgers": len(self.managed_ledgers),
            "partitioned_topics": len(self.partitioned_topics),
            "cursors": len(self.cursors),
            "schemas": len(self.schemas),
            "ledgers": len(self.ledgers),
            **{f"ledgers_{kind}": n for kind, n in sorted(kinds.items())},
            "ledgers_in_bookkeeper": in_bk,
            "ledgers_offloaded": offloaded,
            "objects": len(self.objects),
            "planted": len(self.planted),
        }


@dataclass(frozen=True)
class TopicPlan:
    """One topic (partitioned or not) before its ledgers exist."""

    tenant: str
    namespace: str
    local_name: str
    partitions: int
    """0 for a non-partitioned topic."""
    new: bool
    schema: bool

    def topic(self, local_name: str | None = None) -> TopicName:
        return TopicName("persistent", self.tenant, self.namespace, local_name or self.local_name)
