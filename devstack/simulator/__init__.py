"""A simulated Pulsar cluster, written in the real formats into ZooKeeper and S3.

See docs/simulator.md. `build_model` is pure; `write_cluster` writes through the metadata
layer's stores; `read_cluster` / `expected` compare what is there with the model; `trim`
describes what a broker's retention trim would remove.
"""

from devstack.simulator.generate import build_model
from devstack.simulator.model import (
    ClusterModel,
    Cursor,
    Ledger,
    LedgerInfo,
    LedgerKind,
    ManagedLedger,
    Offload,
    OffloadObject,
    OrphanKind,
    PartitionedTopic,
    Planted,
    Schema,
    SchemaVersion,
)
from devstack.simulator.readback import ReadBack, expected, read_cluster
from devstack.simulator.s3 import ObjectStore, S3ObjectStore, open_object_store
from devstack.simulator.spec import (
    ClusterSpec,
    Compression,
    IdLayout,
    LegacyPlan,
    OffloadDriver,
    OrphanPlan,
    PathWriter,
    legacy_spec,
)
from devstack.simulator.trim import TrimmedLedger, TrimResult, apply_trim, trim
from devstack.simulator.writer import write_cluster, write_model

__all__ = [
    "ClusterModel",
    "ClusterSpec",
    "Compression",
    "Cursor",
    "IdLayout",
    "Ledger",
    "LedgerInfo",
    "LedgerKind",
    "LegacyPlan",
    "ManagedLedger",
    "ObjectStore",
    "Offload",
    "OffloadDriver",
    "OffloadObject",
    "OrphanKind",
    "OrphanPlan",
    "PartitionedTopic",
    "PathWriter",
    "Planted",
    "ReadBack",
    "S3ObjectStore",
    "Schema",
    "SchemaVersion",
    "TrimResult",
    "TrimmedLedger",
    "apply_trim",
    "build_model",
    "expected",
    "legacy_spec",
    "open_object_store",
    "read_cluster",
    "trim",
    "write_cluster",
    "write_model",
]
