"""Write a model into ZooKeeper (through the metadata layer) and S3, in the real formats.

Order, as a cluster's history would have it: the BookKeeper root and its special znodes;
every old ledger in id order, each id first taken from BookKeeper's id generator; then the
managed ledgers, cursors, schema locators and partitioned-topic metadata that reference
them; the offloaded objects; and, after the age boundary, the young ledgers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from devstack.simulator import blobs, znodes
from devstack.simulator.generate import build_model, namespaces
from devstack.simulator.model import ClusterModel, Cursor, Ledger, ManagedLedger, Schema
from devstack.simulator.s3 import ObjectStore
from devstack.simulator.spec import FIRST_LONG_LEDGER_ID, ClusterSpec
from services.core.errors import FailedPrecondition
from services.metadata import (
    ANY_VERSION,
    BookKeeperLedgers,
    CompressionType,
    LedgerLayout,
    LedgerPaths,
    ManagedLedgers,
    MetadataStore,
    NodeExists,
    Schemas,
    ZkMetadataStore,
    partitioned_topic_path,
)
from services.metadata.namespaces import encode_policies
from services.metadata.paths import LAYOUT_ZNODE, layout_text

Progress = Callable[[str, int, int], None]
"""Called as (phase, done, total) while writing."""

DEFAULT_CONCURRENCY = 128
# The first HOB directory of BookKeeper's 63-bit id generator.
FIRST_HOB = "HOB-0000000001"
_CLOCK_PROBE = "/tombstone-simulator-clock"

T = TypeVar("T")


async def write_cluster(
    spec: ClusterSpec,
    *,
    store: MetadataStore,
    s3_client: ObjectStore | None,
    bucket: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Progress | None = None,
    bookkeeper: MetadataStore | None = None,
) -> ClusterModel:
    """Build the model of `spec` and write it; return the model (with `young_since_ms`).

    The ZooKeeper tree must not hold a ledgers root yet (ids would collide). `s3_client` may
    be None only when the model has no objects. `bucket` overrides `spec.bucket`.
    `bookkeeper`: another cluster's store holding the shared ledgers root (`write_model`).
    """
    if bucket is not None and bucket != spec.bucket:
        spec = replace(spec, bucket=bucket)
    model = build_model(spec)
    await write_model(
        model,
        store=store,
        s3_client=s3_client,
        concurrency=concurrency,
        progress=progress,
        bookkeeper=bookkeeper,
    )
    return model


async def write_model(
    model: ClusterModel,
    *,
    store: MetadataStore,
    s3_client: ObjectStore | None,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Progress | None = None,
    bookkeeper: MetadataStore | None = None,
) -> None:
    """`bookkeeper`: the store holding the ledgers root when it is another cluster's (Pulsar
    clusters sharing one BookKeeper, `initialize-cluster-metadata
    --existing-bk-metadata-service-uri`): the root must exist, and the ledgers go there while
    the Pulsar metadata goes into `store`."""
    if model.objects and s3_client is None:
        raise FailedPrecondition("the model has offloaded objects but no S3 client was given")
    writer = _Writer(
        model, store, concurrency, progress or (lambda _p, _d, _t: None), bookkeeper or store
    )
    if bookkeeper is None:
        await writer.bookkeeper_root()
    elif await bookkeeper.exists(writer.root) is None:
        raise FailedPrecondition(f"{writer.root} does not exist: the shared BookKeeper comes first")
    await writer.pulsar_roots()
    await writer.ledgers(young=False)
    await writer.pulsar_metadata()
    if s3_client is not None and model.objects:
        await writer.objects(s3_client)
    model.young_since_ms = await writer.age_boundary()
    await writer.ledgers(young=True)


class _Writer:
    def __init__(
        self,
        model: ClusterModel,
        store: MetadataStore,
        concurrency: int,
        progress: Progress,
        bookkeeper: MetadataStore,
    ) -> None:
        self.model = model
        self.store = store
        self.bk_store = bookkeeper
        self.concurrency = concurrency
        self.progress = progress
        self.root = model.spec.ledgers_root
        self.idgen_lock = asyncio.Lock()
        # One ledger manager per layout in play: each ledger sits where its writer put it.
        self.bk = {
            layout: BookKeeperLedgers(bookkeeper, paths=LedgerPaths(root=self.root, layout=layout))
            for layout in LedgerLayout
        }

    async def bookkeeper_root(self) -> None:
        """The root and its special znodes, as BookKeeper's format and bookies leave them."""
        bk = self.bk_store
        if await bk.exists(self.root) is not None:
            raise FailedPrecondition(f"{self.root} already exists: simulate into an empty tree")
        await bk.create(self.root, b"", make_parents=True)
        await bk.create(f"{self.root}/{LAYOUT_ZNODE}", layout_text(self.model.spec.layout))
        await bk.create(f"{self.root}/INSTANCEID", self.model.instance_id.encode())
        await bk.create(f"{self.root}/available")
        await bk.create(f"{self.root}/available/readonly")
        # Bookies register ephemerally; the simulator has no bookie sessions to hold them,
        # so their registrations are persistent stand-ins.
        for bookie in self.model.bookies:
            await bk.create(f"{self.root}/available/{bookie}")
        await bk.create(f"{self.root}/idgen")
        if any(ledger_id >= FIRST_LONG_LEDGER_ID for ledger_id in self.model.ledgers):
            await bk.create(f"{self.root}/idgen-long")
            await bk.create(f"{self.root}/idgen-long/{FIRST_HOB}")

    async def pulsar_roots(self) -> None:
        """The Pulsar roots, the clusters' registrations and the namespaces' policies."""
        for path in ("/managed-ledgers", "/schemas", "/admin"):
            if await self.store.exists(path) is None:
                await self.store.create(path)
        spec = self.model.spec
        for name in (spec.cluster_name, *spec.replicated_to):
            await self.cluster_registration(name)
        for tenant, namespace in namespaces(spec):
            replicas = [spec.cluster_name, *(spec.replicated_to if tenant == "public" else ())]
            await self.namespace_policies(tenant, namespace, sorted(replicas))

    async def cluster_registration(self, name: str) -> None:
        """`/admin/clusters/<name>` with its `ClusterData`, as `pulsar initialize-cluster-metadata`
        (or `pulsar-admin clusters create` for a replication peer) writes it: the reconciler's
        pre-flight looks `--cluster` up there."""
        path = f"/admin/clusters/{name}"
        if await self.store.exists(path) is None:
            data = {
                "serviceUrl": "http://localhost:8080",
                "brokerServiceUrl": "pulsar://localhost:6650",
            }
            await self.store.create(path, json.dumps(data).encode(), make_parents=True)

    async def namespace_policies(self, tenant: str, namespace: str, replicas: list[str]) -> None:
        """`/admin/policies/<tenant>` (`TenantInfo`) and `/admin/policies/<tenant>/<ns>`
        (`Policies`), as `TenantResources.createTenantAsync` and
        `NamespaceResources.createPoliciesAsync` write them (Jackson, field names as Pulsar's)."""
        tenant_path = f"/admin/policies/{tenant}"
        if await self.store.exists(tenant_path) is None:
            info = {"adminRoles": [], "allowedClusters": replicas}
            await self.store.create(tenant_path, json.dumps(info).encode(), make_parents=True)
        await self.store.create(f"{tenant_path}/{namespace}", encode_policies(replicas))

    async def ledgers(self, *, young: bool) -> None:
        """Every ledger ever allocated, in id order: allocate the id, then write the znode."""
        todo = [led for _, led in sorted(self.model.ledgers.items()) if led.young == young]
        await self._bounded(f"ledgers{' (young)' if young else ''}", todo, self._ledger)

    async def _ledger(self, ledger: Ledger) -> None:
        await self._allocate(ledger.ledger_id)
        if ledger.in_bookkeeper:
            await self.bk[ledger.path_layout].create(
                ledger.metadata,
                format_version=ledger.metadata.format_version,
                container_parents=True,
            )

    async def _allocate(self, ledger_id: int) -> None:
        """Take `ledger_id` from BookKeeper's generator: one child created then deleted.

        The generator's next id is its parent's child version, which grows by one per
        created child whatever its name; so after the simulator's ledgers a real
        `idgen/ID-` (or `idgen-long/HOB-0000000001/ID-`) create yields the next id.
        """
        if ledger_id >= FIRST_LONG_LEDGER_ID:
            parent = f"{self.root}/idgen-long/{FIRST_HOB}"
            seq = ledger_id - FIRST_LONG_LEDGER_ID
        else:
            parent, seq = f"{self.root}/idgen", ledger_id
        if isinstance(self.bk_store, ZkMetadataStore):
            node = f"{parent}/ID-{seq:010d}"
            await self.bk_store.create(node)
            await self.bk_store.delete(node, version=ANY_VERSION)
            return
        # Elsewhere (Oxia) a sequential number is the parent's count of modifications, which
        # a plain create does not advance: the id is taken as a generator takes it, one at a
        # time, since concurrent takers of one parent race for each number.
        async with self.idgen_lock:
            node, _ = await self.bk_store.create_sequential(f"{parent}/ID-")
            await self.bk_store.delete(node, version=ANY_VERSION)

    async def pulsar_metadata(self) -> None:
        """ML znodes (0 bytes for new topics), cursors, schema locators, partitions."""
        spec = self.model.spec
        mls = ManagedLedgers(
            self.store,
            compression=CompressionType[spec.compression.value],
            compression_threshold_bytes=spec.compression_threshold,
        )
        schemas = Schemas(self.store)

        async def create_ml(ml: ManagedLedger) -> None:
            await mls.create(ml.name, None if ml.empty_znode else znodes.ml_to_proto(ml))

        async def create_cursor(c: Cursor) -> None:
            await mls.create_cursor(c.ml_name, c.name, znodes.cursor_to_proto(c))

        async def create_schema(s: Schema) -> None:
            await schemas.create(s.schema_id, znodes.locator_to_proto(s))

        model = self.model
        await self._bounded("managed ledgers", list(model.managed_ledgers.values()), create_ml)
        await self._bounded("cursors", list(model.cursors.values()), create_cursor)
        await self._bounded("schemas", list(model.schemas.values()), create_schema)
        await self._bounded(
            "partitioned topics",
            list(model.partitioned_topics.values()),
            lambda p: self._create(partitioned_topic_path(p.topic), znodes.partitioned_znode(p)),
        )

    async def _create(self, path: str, data: bytes) -> None:
        """Pulsar's metadata store creates missing parents as CONTAINER znodes."""
        await self.store.create(path, data, make_parents=True, container_parents=True)

    async def objects(self, s3: ObjectStore) -> None:
        for bucket in sorted({obj.bucket for obj in self.model.objects.values()}):
            await s3.ensure_bucket(bucket)
        await self._bounded(
            "offloaded objects",
            [self.model.objects[key] for key in sorted(self.model.objects)],
            lambda o: s3.put_object(
                bucket=o.bucket, key=o.key, body=blobs.object_body(o), metadata=o.user_metadata
            ),
        )

    async def age_boundary(self) -> int:
        """The server's clock between old and young znodes (see `ClusterModel.young_since_ms`)."""
        try:
            stat = await self.store.create(_CLOCK_PROBE)
        except NodeExists:
            await self.store.delete(_CLOCK_PROBE, version=ANY_VERSION)
            stat = await self.store.create(_CLOCK_PROBE)
        await self.store.delete(_CLOCK_PROBE, version=ANY_VERSION)
        # ctime has millisecond resolution: let the clock move past the boundary.
        await asyncio.sleep(0.005)
        return stat.ctime_ms + 1

    async def _bounded(
        self, phase: str, items: list[T], work: Callable[[T], Awaitable[None]]
    ) -> None:
        """Run `work` over `items` in order with at most `concurrency` in flight."""
        total = len(items)
        done = 0
        iterator = iter(items)
        self.progress(phase, 0, total)

        async def worker() -> None:
            nonlocal done
            for item in iterator:
                await work(item)
                done += 1
                if done % 1000 == 0 or done == total:
                    self.progress(phase, done, total)

        async with asyncio.TaskGroup() as group:
            for _ in range(min(self.concurrency, total)):
                group.create_task(worker())
