"""The extract's ZooKeeper bound: one task never has more than `concurrency` requests in
flight, whatever it reads (a BookKeeper subtree, a namespace's topics and cursors, V1 schema
directories). This per-task ceiling, times the tasks running at once, is the cluster-wide
bound documented in docs/reconciler.md."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

from devstack.s3 import S3Server
from devstack.simulator import ClusterSpec, OrphanPlan
from devstack.zookeeper import ZooKeeperServer
from services.metadata import MetadataStore, ZkMetadataStore
from services.metadata.paths import LedgerPaths
from services.scan.extract import tasks as T
from services.scan.extract.ledger_columns import LedgerColumns
from services.scan.extract.units import BK, ML, plan_units
from tests.scan import sim

SPEC = ClusterSpec(
    seed=41, tenants=1, namespaces_per_tenant=1, topics_per_namespace=6, orphans=OrphanPlan.some(1)
)
LIMIT = 2
R = TypeVar("R")


class InFlight:
    """The real ZooKeeper store, counting the reads in flight at once (the readers use only
    `get`, `get_many` and `get_children`)."""

    def __init__(self, store: ZkMetadataStore) -> None:
        self._store = store
        self.now = 0
        self.peak = 0
        self.calls = 0

    async def _counted(self, call: Callable[[], Awaitable[R]]) -> R:
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)
        try:
            return await call()
        finally:
            self.now -= 1

    async def get(self, path: str) -> Any:
        return await self._counted(lambda: self._store.get(path))

    async def get_children(self, path: str) -> list[str]:
        return await self._counted(lambda: self._store.get_children(path))

    async def get_many(self, paths: Sequence[str]) -> Any:
        """One multiRead: one request in flight, whatever the number of paths."""
        return await self._counted(lambda: self._store.get_many(paths))


async def test_a_task_keeps_at_most_concurrency_reads_in_flight(
    zk: ZooKeeperServer, s3: S3Server
) -> None:
    """Subtree, namespace and V1 schema directories (10 topics below each of two namespace
    directories): each reader, limited to 2, never had more than 2 ZooKeeper requests in
    flight; the namespace and schema readers reached it, and the subtree reader read its
    ledgers in fewer requests than ledgers (multiRead batches)."""
    await sim.write(zk, s3, SPEC)
    async with ZkMetadataStore.connect(zk.address) as store:
        for i in range(20):  # V1 locators: /schemas/<tenant>/<cluster>/<ns>/<topic>
            path = f"/schemas/v1t/c/ns{i % 2}/x{i}"
            await store.create(path, b"not a locator", make_parents=True)
    units, _, _ = await plan_units(sim.settings(zk, s3, SPEC))
    limits = T.ReadLimits(LIMIT)
    seen: dict[str, tuple[int, int, int]] = {}
    ledgers = LedgerColumns("/ledgers")
    async with ZkMetadataStore.connect(zk.address) as real:
        readers: dict[str, Callable[[MetadataStore, T.Out], Awaitable[Any]]] = {
            "bk": lambda s, out: T.read_bk_subtree(
                s, LedgerPaths("/ledgers"), _first(units, BK), ledgers, limits
            ),
            "ml": lambda s, out: T.read_managed_ledgers(s, _first(units, ML), out, limits),
            "schemas": lambda s, out: T.read_schemas(s, "v1t", out, limits),
        }
        for name, reader in readers.items():
            counting = InFlight(real)
            out: T.Out = []
            await reader(cast(MetadataStore, counting), out)
            rows = len(ledgers) if name == "bk" else len(out)
            seen[name] = (counting.peak, counting.calls, rows)
    peaks = {name: peak for name, (peak, _, _) in seen.items()}
    assert max(peaks.values()) <= LIMIT
    assert (peaks["ml"], peaks["schemas"]) == (LIMIT, LIMIT)
    _, bk_calls, bk_rows = seen["bk"]
    assert 0 < bk_calls < bk_rows, seen


def _first(units: list[Any], kind: str) -> str:
    return str(next(u.scope for u in units if u.kind == kind))
