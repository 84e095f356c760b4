"""A neighbour Pulsar cluster sharing the demo cluster's BookKeeper, written as Pulsar writes it.

`pulsar initialize-cluster-metadata --existing-bk-metadata-service-uri` (Pulsar >= 2.6) gives a
second cluster its own metadata store and the first cluster's ledgers root. Here the
neighbour's metadata store is a chroot of the same ZooKeeper (`/neighbour`): its managed
ledgers, cursors, schema locators and `/admin` live under it, while its ledgers sit in OUR
ledgers root, their ids taken from the one id generator both clusters' BookKeeper clients use.

What is written, in the order a cluster's history would write it:

1. `PulsarClusterMetadataSetup` (`initialize-cluster-metadata`): `/admin/clusters/<name>`
   (`ClusterData`), the `public` tenant and its `public/default` namespace, `/managed-ledgers`
   and `/namespace`. With an existing BookKeeper it creates no ledgers root.
2. `TenantResources` / `NamespaceResources` (`pulsar-admin tenants create`, `namespaces
   create`): a tenant and a namespace that exist only there, replicated to the neighbour alone.
3. Ledgers, each id from the shared generator (`ZkLedgerIdGenerator`: a sequential `ID-`
   child of `<root>/idgen` created and deleted; `LongZkLedgerIdGenerator` under
   `idgen-long/HOB-0000000001` once ids are long) and its znode at the hybrid path
   (`PulsarLedgerManager`, Pulsar >= 2.10), with Pulsar's custom metadata:
   - an orphan: a CLOSED data ledger the topic's retention removed from its list whose
     delete failed (`ManagedLedgerImpl.internalTrimLedgers`, `asyncDeleteLedger`): the
     neighbour's own business, not ours;
   - a schema ledger, closed before its locator names it
     (`BookkeeperSchemaStorage.addNewSchemaEntryToStore`);
   - a CLOSED data ledger, and the OPEN current one a rollover created
     (`ManagedLedgerImpl.createLedgerAfterClosed`);
   - a cursor ledger, OPEN, as `ManagedCursorImpl.createNewMetadataLedger` leaves it.
4. The owners: the ML znode listing the CLOSED and the current ledger
   (`ManagedLedgerImpl` via `MetaStoreImpl.asyncUpdateLedgerIds`), the cursor znode whose
   `cursorsLedgerId` is the cursor ledger (`ManagedCursorImpl.persistPositionMetaStore`), and
   the schema locator indexing the schema ledger (`BookkeeperSchemaStorage.putSchema`).

Nothing of it may be deleted by our services: every one of its ledgers is either referenced
by the neighbour or the neighbour's to clean up.
"""

from __future__ import annotations

import enum
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from devstack.ledger_writer import LedgerWriter
from devstack.simulator import znodes
from devstack.simulator._factory import pulsar_metadata
from devstack.simulator.model import (
    ClusterModel,
    Cursor,
    LedgerInfo,
    ManagedLedger,
    Schema,
    SchemaVersion,
)
from devstack.simulator.spec import FIRST_LONG_LEDGER_ID
from services.metadata import (
    LedgerState,
    ManagedLedgers,
    MetadataStore,
    Schemas,
    ZkMetadataStore,
    managed_ledger_name,
    schema_id_of,
)
from services.metadata.namespaces import POLICIES_ROOT, encode_policies, policies_path

CLUSTER = "east"
CHROOT = "/neighbour"
TENANT = "east-only"
NAMESPACE = f"{TENANT}/invoicing"
TOPIC = f"persistent://{NAMESPACE}/invoices"
SUBSCRIPTION = "billing"
# Entries of the closed ledgers; the cursor's mark-delete position is inside the closed one.
_ENTRIES = 120
_ENTRY_BYTES = 512


class Role(enum.Enum):
    """What a neighbour ledger is to the neighbour."""

    ORPHAN = "orphan (trimmed, delete failed)"
    SCHEMA = "schema ledger"
    CLOSED = "closed data ledger"
    CURRENT = "current data ledger (OPEN)"
    CURSOR = "cursor ledger (OPEN)"


@dataclass(frozen=True)
class NeighbourLedger:
    ledger_id: int
    role: Role
    path: str
    """Its znode in the shared ledgers root."""


@dataclass(frozen=True)
class PlantedNeighbour:
    """What `plant` wrote: enough to address the neighbour's ledgers and check them later."""

    cluster: str
    chroot: str
    servers: str
    ledgers_root: str
    ml_name: str
    cursor: str
    schema_id: str
    ledgers: tuple[NeighbourLedger, ...] = field(default_factory=tuple)
    oxia_namespace: str | None = None
    """On Oxia: the namespace holding the neighbour's metadata (`servers` is Oxia's)."""

    @property
    def store_url(self) -> str:
        """The neighbour's metadata store as `TOMBSTONE_SHARED_CLUSTERS` names it."""
        if self.oxia_namespace is not None:
            return f"oxia://{self.servers}/{self.oxia_namespace}"
        return f"zk:{self.servers}{self.chroot}"

    @property
    def metadata_at(self) -> str:
        """Where its metadata is, for the demo's lines: the chroot, or Oxia's namespace."""
        if self.oxia_namespace is not None:
            return f"Oxia namespace {self.oxia_namespace}"
        return self.chroot

    @property
    def ledger_ids(self) -> frozenset[int]:
        return frozenset(led.ledger_id for led in self.ledgers)

    def ids(self, *roles: Role) -> list[int]:
        return [led.ledger_id for led in self.ledgers if led.role in roles]

    def describe(self) -> str:
        """One line: what was planted, where."""
        ids = ", ".join(f"{led.ledger_id} {led.role.value}" for led in self.ledgers)
        where = self.metadata_at if self.oxia_namespace else f"chroot {self.chroot}"
        return (
            f"Neighbour cluster {self.cluster!r} planted (undeclared to the services): metadata "
            f"in {where} (namespace {NAMESPACE} exists only there), ledgers in "
            f"the shared root {self.ledgers_root}: {ids}"
        )


async def plant_next_to(
    model: ClusterModel,
    servers: str,
    *,
    chroot: str = CHROOT,
    cluster: str = CLUSTER,
) -> PlantedNeighbour:
    """Plant the neighbour in the ZooKeeper at `servers` whose root holds `model`'s cluster."""
    async with ZkMetadataStore.connect(servers) as shared:
        if await shared.exists(chroot) is None:
            await shared.create(chroot)
        async with ZkMetadataStore.connect(servers, chroot=chroot) as theirs:
            return await plant(
                shared,
                theirs,
                ledgers_root=model.spec.ledgers_root,
                bookies=model.bookies,
                ensemble_size=model.spec.ensemble_size,
                long_ids=any(i >= FIRST_LONG_LEDGER_ID for i in model.ledgers),
                cluster=cluster,
                servers=servers,
                chroot=chroot,
            )


async def plant(
    shared: MetadataStore,
    theirs: MetadataStore,
    *,
    ledgers_root: str,
    bookies: tuple[str, ...],
    ensemble_size: int,
    long_ids: bool,
    cluster: str = CLUSTER,
    servers: str = "",
    chroot: str = CHROOT,
    oxia_namespace: str | None = None,
) -> PlantedNeighbour:
    """Write the neighbour: `theirs` is its own metadata store, `shared` the store holding the
    ledgers root both clusters use (already initialised by our cluster's BookKeeper)."""
    await _cluster_metadata_setup(theirs, cluster)
    await _tenant_and_namespace(theirs, cluster)
    ml_name = managed_ledger_name(TOPIC)
    schema_id = schema_id_of(TOPIC)
    ledgers = LedgerWriter(
        shared,
        ledgers_root,
        bookies,
        ensemble_size,
        long_ids=long_ids,
        entries=_ENTRIES,
        entry_bytes=_ENTRY_BYTES,
    )
    writer = _LedgerWriter(ledgers)
    # Creation order: the oldest data ledger (trimmed later), the schema the first producer
    # registered, the closed ledger, the subscription's cursor ledger, the rollover's ledger.
    data = pulsar_metadata(ml_name=ml_name)
    # Listed by no owner: the neighbour's orphan, its own to clean up.
    await writer.write(Role.ORPHAN, LedgerState.CLOSED, data)
    schema = await writer.write(
        Role.SCHEMA, LedgerState.CLOSED, pulsar_metadata(schema_id=schema_id)
    )
    closed = await writer.write(Role.CLOSED, LedgerState.CLOSED, data)
    cursor_meta = pulsar_metadata(ml_name=ml_name, cursor=SUBSCRIPTION)
    cursor = await writer.write(Role.CURSOR, LedgerState.OPEN, cursor_meta)
    current = await writer.write(Role.CURRENT, LedgerState.OPEN, data)
    now_ms = int(time.time() * 1000)
    await _owners(theirs, ml_name, schema_id, closed, current, cursor, schema, now_ms)
    return PlantedNeighbour(
        cluster=cluster,
        chroot=chroot,
        servers=servers,
        ledgers_root=ledgers_root,
        ml_name=ml_name,
        cursor=SUBSCRIPTION,
        schema_id=schema_id,
        ledgers=tuple(writer.written),
        oxia_namespace=oxia_namespace,
    )


async def _cluster_metadata_setup(store: MetadataStore, cluster: str) -> None:
    """`PulsarClusterMetadataSetup` with `--existing-bk-metadata-service-uri`: the cluster's
    registration, the default tenant and namespace, the roots brokers expect."""
    data = {"serviceUrl": "http://east:8080", "brokerServiceUrl": "pulsar://east:6650"}
    await _json(store, f"/admin/clusters/{cluster}", data)
    await _json(store, f"{POLICIES_ROOT}/public", _tenant_info(cluster))
    await store.create(policies_path("public/default"), encode_policies([cluster]))
    for path in ("/managed-ledgers", "/namespace"):
        await store.create(path)


async def _tenant_and_namespace(store: MetadataStore, cluster: str) -> None:
    """`TenantResources.createTenant` and `NamespaceResources.createPolicies`: the namespace
    our cluster does not have, replicated to the neighbour alone."""
    await _json(store, f"{POLICIES_ROOT}/{TENANT}", _tenant_info(cluster))
    await store.create(policies_path(NAMESPACE), encode_policies([cluster]))


def _tenant_info(cluster: str) -> dict[str, object]:
    return {"adminRoles": [], "allowedClusters": [cluster]}


async def _json(store: MetadataStore, path: str, doc: Mapping[str, object]) -> None:
    await store.create(path, json.dumps(doc).encode(), make_parents=True)


class _LedgerWriter:
    """Ledgers in the shared root, their ids from the shared generator (the one our cluster's
    BookKeeper uses: sharing it keeps ids unique across the clusters), each kept with its
    role."""

    def __init__(self, ledgers: LedgerWriter) -> None:
        self.ledgers = ledgers
        self.written: list[NeighbourLedger] = []

    async def write(self, role: Role, state: LedgerState, custom: dict[str, bytes]) -> int:
        ledger_id = await self.ledgers.write(state, custom)
        self.written.append(NeighbourLedger(ledger_id, role, self.ledgers.ledger_path(ledger_id)))
        return ledger_id


async def _owners(
    store: MetadataStore,
    ml_name: str,
    schema_id: str,
    closed: int,
    current: int,
    cursor_ledger: int,
    schema_ledger: int,
    now_ms: int,
) -> None:
    """The ML list, the cursor and the schema locator that reference the neighbour's ledgers."""
    ml = ManagedLedger(
        ml_name,
        TOPIC,
        (
            LedgerInfo(closed, _ENTRIES, _ENTRIES * _ENTRY_BYTES, now_ms),
            # The current ledger is listed with its id alone until it is closed.
            LedgerInfo(current, None, None, 0),
        ),
    )
    await ManagedLedgers(store).create(ml_name, znodes.ml_to_proto(ml))
    cursor = Cursor(ml_name, SUBSCRIPTION, cursor_ledger, closed, _ENTRIES // 2, now_ms)
    await ManagedLedgers(store).create_cursor(ml_name, SUBSCRIPTION, znodes.cursor_to_proto(cursor))
    digest = hashlib.sha256(b'{"type":"record","name":"Invoice"}').digest()
    schema = Schema(schema_id, (SchemaVersion(0, schema_ledger, 0, digest),))
    await Schemas(store).create(schema_id, znodes.locator_to_proto(schema))
