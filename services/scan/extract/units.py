"""The extract's work units and what one task does with its unit.

The driver lists the units (`plan_units`): BookKeeper subtrees, `tenant/x` prefixes of the
managed-ledger tree, schema tenants, and buckets or inventory files. Each unit becomes one
Spark task; the task runs its own asyncio loop with its own metadata-store session
(ZooKeeper or Oxia, `stores.open_store`) or S3 client (`run_unit`) and always returns its
manifest row(s), also when it failed. On Oxia a unit is a key range: Oxia orders keys
hierarchically, so a BookKeeper subtree or a `tenant/x` prefix is one contiguous range
that the unit's listings walk.

Clusters declared as sharing the ledgers root (`shared_clusters`) get the same managed-ledger
and schema units, read from their own metadata store; their rows carry the cluster's name
(`metadata_cluster`), so one analysis sees every cluster's references. One more unit reads
the namespace policies of the configuration store (which namespaces exist here).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field, replace

from services.core.shared_clusters import ZOOKEEPER, SharedCluster, StoreUrl
from services.core.zk_security import ZooKeeperSecurity
from services.metadata import (
    MANAGED_LEDGERS_ROOT,
    SCHEMAS_ROOT,
    BookKeeperLedgers,
    LedgerLayout,
    LedgerPaths,
    MetadataStore,
    NoNode,
)
from services.metadata.namespaces import POLICIES_ROOT
from services.scan.extract import tasks as T
from services.scan.extract.inventory import DEFAULT_CSV_SCHEMA
from services.scan.extract.ledger_columns import LedgerColumns
from services.scan.extract.namespaces import read_namespaces
from services.scan.extract.rows import Row
from services.scan.extract.s3 import S3Settings, open_lister
from services.scan.extract.stores import open_store

#: Unit kinds. `managed_ledgers` units also yield the `ml_ledgers` and `cursors` tables.
BK, ML, SCHEMAS, BUCKET, INVENTORY, NAMESPACES = (
    "bk_ledgers",
    "managed_ledgers",
    "schemas",
    "bucket",
    "inventory",
    "namespaces",
)
OBJECTS = "offload_objects"
#: Tables whose rows say which cluster's metadata store they come from.
TAGGED_TABLES = frozenset({"managed_ledgers", "ml_ledgers", "cursors", "schemas"})


@dataclass(frozen=True)
class ExtractSettings:
    """Everything an executor needs (pickled into every task)."""

    zookeeper: str
    """Pulsar's metadata store as a ZooKeeper connect string; "" when `metadata_store` names
    it instead."""
    cluster: str
    chroot: str | None = None
    ledgers_root: str = "/ledgers"
    configuration_store: StoreUrl | None = None
    """Pulsar's configuration store when it is a store of its own (a ZooKeeper or an Oxia
    namespace): the cluster's registration (pre-flight) and the namespace policies are read
    there; else in our metadata store."""
    bookkeeper_store: StoreUrl | None = None
    """Where BookKeeper keeps its ledger metadata (the ledgers root) when it is not the
    metadata store (`--bookkeeper-metadata`, a ZooKeeper store); the BookKeeper units are
    read there."""
    metadata_store: StoreUrl | None = None
    """Pulsar's metadata store when it is not a ZooKeeper named by `zookeeper` and `chroot`
    (an Oxia namespace, `--metadata-store oxia://...`)."""
    shared_clusters: tuple[SharedCluster, ...] = ()
    """Other clusters sharing the ledgers root (ZooKeeper stores only): their managed
    ledgers, cursors and schema locators are read too."""
    zk_timeout_s: float = 10.0
    """Connect and request timeout of every metadata-store session (ZooKeeper or Oxia)."""
    zk_security: ZooKeeperSecurity = field(default_factory=ZooKeeperSecurity)
    """Authentication and TLS of every ZooKeeper session (`TOMBSTONE_ZOOKEEPER_*`)."""
    s3: S3Settings = field(default_factory=S3Settings)
    buckets: tuple[str, ...] = ()
    """The allowed buckets: listed live, or read from the inventory files."""
    locations: tuple[tuple[str, str, str | None], ...] = ()
    """(bucket, endpoint, region or None) of buckets that are not at `s3`'s endpoint and
    region (`--s3-location`): Pulsar's per-namespace offload policies can put each bucket
    elsewhere. Listed there with the same credentials."""
    inventories: tuple[str, ...] = ()
    inventory_schema: tuple[str, ...] = DEFAULT_CSV_SCHEMA
    head_objects: bool = True
    """HEAD Pulsar-named objects for `managedledgername` / `pulsarclustername`."""
    subtree_level: int = 4
    """BookKeeper subtree depth of a unit: 4 means the parents of the leaves in both layouts
    (short `00/0000`, long `000/0000/0042/9496`), at most 10,000 ledgers each."""
    concurrency: int = 64
    """Requests in flight per task (`ReadLimits`); a task holds one ZooKeeper session. The
    cluster-wide ceiling is this times the tasks running at once (docs/reconciler.md)."""
    task_timeout_s: float = 3600.0


@dataclass(frozen=True)
class Unit:
    kind: str
    scope: str
    cluster: str | None = None
    """A declared neighbour whose metadata store the unit reads; None: ours."""

    @property
    def task_id(self) -> str:
        return f"{self.kind}{_at(self.cluster)}:{self.scope}"


def _at(cluster: str | None) -> str:
    return f"@{cluster}" if cluster else ""


def now_ms() -> int:
    return int(time.time() * 1000)


def manifest_row(
    task_id: str,
    kind: str,
    scope: str,
    rows: int,
    status: str,
    error: str | None,
    started: int,
    zxid: int | None,
) -> Row:
    return {
        "task_id": task_id,
        "kind": kind,
        "scope": scope,
        "rows": rows,
        "status": status,
        "error": error,
        "started_ms": started,
        "ended_ms": now_ms(),
        "zxid": zxid,
    }


def store_of(settings: ExtractSettings, cluster: str | None) -> StoreUrl:
    """The metadata store of `cluster` (None: ours)."""
    if cluster is None:
        if settings.metadata_store is not None:
            return settings.metadata_store
        return StoreUrl(ZOOKEEPER, settings.zookeeper, settings.chroot or "")
    for shared in settings.shared_clusters:
        if shared.name == cluster:
            return shared.store
    raise KeyError(cluster)


def bookkeeper_of(settings: ExtractSettings) -> StoreUrl:
    """Where the ledgers root is: BookKeeper's own store, else our metadata store."""
    return settings.bookkeeper_store or store_of(settings, None)


def policies_store(settings: ExtractSettings) -> StoreUrl:
    """Where namespace policies live: the configuration store, else our metadata store."""
    return settings.configuration_store or store_of(settings, None)


def store_session(
    settings: ExtractSettings, url: StoreUrl | None = None
) -> contextlib.AbstractAsyncContextManager[MetadataStore]:
    """A session to `url` (default: our metadata store) with the run's timeouts."""
    return open_store(
        url or store_of(settings, None),
        timeout_s=settings.zk_timeout_s,
        security=settings.zk_security,
    )


async def _layout(store: MetadataStore, root: str) -> LedgerLayout:
    """The layout `<root>/LAYOUT` names; Pulsar's default (hybrid) when there is none."""
    try:
        return await BookKeeperLedgers(store, paths=LedgerPaths(root)).read_layout()
    except NoNode:
        return LedgerLayout.HIERARCHICAL


def unit_paths(root: str, subtree: str) -> LedgerPaths:
    """The path rules of one BookKeeper unit: the flat unit is `""`, every other unit is a
    hierarchical subtree (2-digit short or 3-digit long tree, whatever LAYOUT says)."""
    return LedgerPaths(root, LedgerLayout.FLAT if subtree == "" else LedgerLayout.HIERARCHICAL)


async def _bk_units(store: MetadataStore, settings: ExtractSettings) -> list[Unit]:
    """Every place a ledger znode can be under the layouts in play (reference §1.1): the
    2-digit and 3-digit hierarchical trees whatever LAYOUT names (Pulsar >= 2.10's driver
    writes hybrid paths; BookKeeper's long manager writes 3-digit ones), plus the root's flat
    leaves when LAYOUT names the flat manager."""
    root = settings.ledgers_root
    hierarchical = BookKeeperLedgers(store, paths=LedgerPaths(root, LedgerLayout.HIERARCHICAL))
    units = [Unit(BK, s) for s in await hierarchical.subtrees(level=settings.subtree_level)]
    if await _layout(store, root) is LedgerLayout.FLAT:
        units.insert(0, Unit(BK, ""))
    return units


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return sorted(await store.get_children(path))
    except NoNode:
        return []


async def plan_units(settings: ExtractSettings) -> tuple[list[Unit], list[Row], int | None]:
    """The units and the driver's own manifest rows (one per listing, failed ones included),
    and the zxid the driver saw in the metadata store."""
    units: list[Unit] = []
    rows: list[Row] = []
    ours = ((ML, MANAGED_LEDGERS_ROOT), (SCHEMAS, SCHEMAS_ROOT))
    bookkeeper = bookkeeper_of(settings)
    plans: list[tuple[StoreUrl, tuple[tuple[str, str], ...]]]
    if bookkeeper == store_of(settings, None):  # one store, one session
        plans = [(bookkeeper, ((BK, settings.ledgers_root), *ours))]
    else:
        plans = [(bookkeeper, ((BK, settings.ledgers_root),)), (store_of(settings, None), ours)]
    zxid = None
    for url, listings in plans:
        found_units, found_rows, zxid = await _plan_store(settings, url, listings, None)
        units.extend(found_units)
        rows.extend(found_rows)
    for shared in settings.shared_clusters:
        found_units, found_rows, _ = await _plan_store(
            settings, store_of(settings, shared.name), ours, shared.name
        )
        units.extend(found_units)
        rows.extend(found_rows)
    units.append(Unit(NAMESPACES, POLICIES_ROOT))
    if settings.inventories:
        units.extend(Unit(INVENTORY, path) for path in settings.inventories)
    else:
        units.extend(Unit(BUCKET, bucket) for bucket in settings.buckets)
    scope = ",".join(settings.buckets) or "(no bucket allowed)"
    started = now_ms()
    rows.append(
        manifest_row(
            f"list:{OBJECTS}", OBJECTS, scope, len(settings.buckets), "ok", None, started, None
        )
    )
    return units, rows, zxid


async def _plan_store(
    settings: ExtractSettings,
    url: StoreUrl,
    listings: tuple[tuple[str, str], ...],
    cluster: str | None,
) -> tuple[list[Unit], list[Row], int | None]:
    """The units of `listings` in one store (ours, BookKeeper's or a declared neighbour's),
    their manifest rows and the zxid seen: a store that cannot be listed is a failed row
    (the analysis then refuses)."""
    units: list[Unit] = []
    rows: list[Row] = []
    started = now_ms()
    zxid = None
    try:
        async with store_session(settings, url) as store:
            for kind, root in listings:
                found = [
                    Unit(u.kind, u.scope, cluster) for u in await _list_units(store, settings, kind)
                ]
                units.extend(found)
                zxid = store.last_zxid
                task = f"list:{kind}{_at(cluster)}"
                rows.append(manifest_row(task, kind, root, len(found), "ok", None, started, zxid))
    except Exception as e:  # every failure becomes a failed manifest row
        done = {row["kind"] for row in rows}
        error = f"{type(e).__name__}: {e}"
        if cluster is not None:
            error = f"{cluster}: {error}"
        for kind, root in listings:
            if kind not in done:
                task = f"list:{kind}{_at(cluster)}"
                rows.append(manifest_row(task, kind, root, 0, "failed", error, started, None))
        zxid = None
    return units, rows, zxid


async def _list_units(store: MetadataStore, settings: ExtractSettings, kind: str) -> list[Unit]:
    if kind == BK:
        return await _bk_units(store, settings)
    if kind == ML:
        units = []
        for tenant in await _children(store, MANAGED_LEDGERS_ROOT):
            for child in await _children(store, f"{MANAGED_LEDGERS_ROOT}/{tenant}"):
                units.append(Unit(ML, f"{tenant}/{child}"))
        return units
    return [Unit(SCHEMAS, tenant) for tenant in await _children(store, SCHEMAS_ROOT)]


@dataclass
class UnitOutput:
    """What one unit read."""

    rows: T.Out
    """Every table's rows but `bk_ledgers`, then the unit's manifest row(s)."""
    ledgers: LedgerColumns | None
    """A BookKeeper unit's ledger rows, as columns (None for the other units)."""


async def read_unit(unit: Unit, settings: ExtractSettings) -> UnitOutput:
    """Read one unit, with its manifest row(s). Never raises for a failed read: the rows read
    before a failure are kept, and the manifest says the task failed."""
    started = now_ms()
    out: T.Out = []
    ledgers = None
    if unit.kind == BK:
        root = unit_paths(settings.ledgers_root, unit.scope).root
        ledgers = LedgerColumns(f"{root}/{unit.scope}" if unit.scope else root)
    status, error, zxid = "ok", None, None
    try:
        async with asyncio.timeout(settings.task_timeout_s):
            zxid = await _dispatch(unit, settings, out, ledgers)
    except T.Truncated as e:
        status, error = "truncated", str(e)
    except TimeoutError:
        status, error = "failed", f"timed out after {settings.task_timeout_s:g}s"
    except Exception as e:  # reported in the manifest, never "no rows"
        status, error = "failed", f"{type(e).__name__}: {e}"
    out.extend(_manifest(unit, out, ledgers, status, error, started, zxid))
    return UnitOutput(out, ledgers)


async def run_unit(unit: Unit, settings: ExtractSettings) -> list[tuple[str, Row]]:
    """Read one unit; its rows (ledgers as dicts too) plus its manifest row(s)."""
    result = await read_unit(unit, settings)
    ledgers = [] if result.ledgers is None else result.ledgers.rows()
    return [(BK, row) for row in ledgers] + result.rows


def _manifest(
    unit: Unit,
    out: T.Out,
    ledgers: LedgerColumns | None,
    status: str,
    error: str | None,
    started: int,
    zxid: int | None,
) -> list[tuple[str, Row]]:
    kinds = {ML: (ML, "cursors"), BUCKET: (OBJECTS,), INVENTORY: (OBJECTS,)}.get(
        unit.kind, (unit.kind,)
    )
    rows = []
    for kind in kinds:
        if kind == BK and ledgers is not None:
            count = len(ledgers)
        else:
            count = sum(1 for table, _ in out if table == kind)
        task_id = unit.task_id if kind == unit.kind else f"{kind}{_at(unit.cluster)}:{unit.scope}"
        row = manifest_row(task_id, kind, unit.scope, count, status, error, started, zxid)
        rows.append(("scan_manifest", row))
    return rows


async def _dispatch(
    unit: Unit, settings: ExtractSettings, out: T.Out, ledgers: LedgerColumns | None
) -> int | None:
    limits = T.ReadLimits(settings.concurrency)
    if unit.kind in (BUCKET, INVENTORY):
        await _objects(unit, settings, out, limits)
        return None
    if unit.kind == NAMESPACES:
        async with store_session(settings, policies_store(settings)) as store:
            await read_namespaces(store, out, limits)
            return store.last_zxid
    where = bookkeeper_of(settings) if unit.kind == BK else store_of(settings, unit.cluster)
    async with store_session(settings, where) as store:
        before = len(out)
        if ledgers is not None:
            paths = unit_paths(settings.ledgers_root, unit.scope)
            await T.read_bk_subtree(store, paths, unit.scope, ledgers, limits)
        elif unit.kind == ML:
            await T.read_managed_ledgers(store, unit.scope, out, limits)
        else:
            await T.read_schemas(store, unit.scope, out, limits)
        for table, row in out[before:]:
            if table in TAGGED_TABLES:
                row["metadata_cluster"] = unit.cluster
        return store.last_zxid


def bucket_s3(settings: ExtractSettings, bucket: str) -> S3Settings:
    """How to reach `bucket`: its `--s3-location`, else the run's endpoint and region."""
    for named, endpoint, region in settings.locations:
        if named == bucket:
            return replace(settings.s3, endpoint_url=endpoint, region=region or settings.s3.region)
    return settings.s3


async def _objects(unit: Unit, settings: ExtractSettings, out: T.Out, limits: T.ReadLimits) -> None:
    buckets = frozenset(settings.buckets)
    if unit.kind == INVENTORY and not settings.head_objects:
        await T.read_inventory_file(
            None, unit.scope, buckets, settings.inventory_schema, out, limits
        )
        return
    # Inventory files list many buckets: their HEADs go to the run's endpoint.
    where = bucket_s3(settings, unit.scope) if unit.kind == BUCKET else settings.s3
    async with open_lister(where) as lister:
        if unit.kind == BUCKET:
            await T.read_bucket(lister, unit.scope, out, limits, head=settings.head_objects)
        else:
            await T.read_inventory_file(
                lister, unit.scope, buckets, settings.inventory_schema, out, limits
            )
