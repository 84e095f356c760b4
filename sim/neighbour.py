"""A second Pulsar cluster sharing our BookKeeper's ledgers root.

Pulsar >= 2.6 lets clusters share one BookKeeper (`pulsar initialize-cluster-metadata
--existing-bk-metadata-service-uri`): each keeps its own metadata store (here a ZooKeeper
ensemble of its own, a second in-memory `ZooKeeper`: its managed ledgers, cursors, schemas
and namespace policies), while its brokers create their ledgers in the shared ledgers root,
with ids from the one id generator of that root (`Cluster.new_ledger`).

The neighbour `east` has:
- the geo-replicated namespace `public/geo` (policies in both clusters naming both), whose
  topics have the names of our topics there: same ML names, same cursor name, same schema id,
  so its ledgers' custom metadata matches our owners' names exactly;
- a namespace of its own, `public/east-local` (no policies in our store);
- topics of its own in `public/default`, a namespace both clusters have (every Pulsar
  cluster has one), under names ours do not have.

Its brokers are unmodified and run no Tombstone: they roll over (the new ledger OPEN and
unlisted for a moment), trim and switch cursors (the old cursor ledger left OPEN), then
delete what they unlinked themselves, failing a drawn share of the time. Their leaked ledgers
stay: our services must never delete any ledger of theirs, referenced or not.

Whether our verifier is told of `east` (`TOMBSTONE_SHARED_CLUSTERS`) is drawn per seed. When
it is not, nothing tells a forged PDLI naming our cluster and an owner of `east` in
`public/default` from one of ours (same namespace, a topic name we might have): that sharing
is the operator's error docs/design.md §4 leaves to the declaration, so the intruder names such an
owner only with `east`'s cluster name, which the verifier refuses whatever the owner.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.metadata.namespaces import encode_policies, policies_path
from services.metadata.pulsar_formats import (
    ManagedCursorInfo,
    ManagedLedgerInfo,
    SchemaLocator,
    decode_cursor_info,
    decode_managed_ledger_info,
    decode_schema_locator,
    encode_cursor_info,
    encode_managed_ledger_info,
    encode_schema_locator,
)
from services.metadata.pulsar_names import (
    cursor_path,
    managed_ledger_path,
    schema_path,
    topic_from_managed_ledger_name,
)
from services.systopic.messages import encode_intent
from services.systopic.ports import OutgoingMessage
from sim.pulsar import CLUSTER, NEIGHBOUR, cursor_meta, data_meta
from sim.schemas import is_schema_path, locator_ledgers, schema_meta
from sim.zk import ZooKeeper
from tombstone.v1 import pending_delete_pb2 as _pd

if TYPE_CHECKING:
    from sim.view import WorldView

GEO_NAMESPACE = "public/geo"
LOCAL_NAMESPACE = "public/east-local"
SHARED_NAMESPACE = "public/default"
"""A namespace both clusters have, each with topics of its own."""
GEO_SHARE = 0.4
"""Of our topics, the share in the geo-replicated namespace."""
DECLARED_SHARE = 0.5
"""Of the seeds, the share where our verifier is told of the neighbour."""
SECONDS = 30.0


@dataclass(frozen=True)
class Owned:
    """Which owner of `east` created a ledger (what its custom metadata names)."""

    component: int
    ml: str = ""
    cursor: str = ""
    schema_id: str = ""


@dataclass
class EastTopic:
    ml: str
    cursor: str = "sub"
    schema_id: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class NeighbourCluster:
    """`east`: its metadata store, its brokers' workload, and what it references."""

    def __init__(self, world: WorldView, seed: int) -> None:
        self.world = world
        # A generator of its own: the other draws of a seed stay as they were.
        self.rng = random.Random(seed * 104729 + 31)
        self.zk = ZooKeeper(world.sched)
        self.zk.on_request = world.check_znode_path
        self.zk.on_write = self._on_write
        self.refs: dict[str, frozenset[int]] = {}
        """Owner path in `east`'s store -> the ledgers it references now."""
        self.ledgers: dict[int, Owned] = {}
        """Every ledger `east` created, with its owner."""
        self.topics: list[EastTopic] = []
        self.delete_failure_share = self.rng.choice([0.3, 0.7])
        self.declared = self.rng.random() < DECLARED_SHARE
        """Whether our verifier is told of this cluster (`TOMBSTONE_SHARED_CLUSTERS`)."""

    # --- references ------------------------------------------------------------------------

    def _on_write(self, path: str, data: bytes | None) -> None:
        if path not in self.refs:
            return
        ids: set[int] = set()
        if data is not None and is_schema_path(path):
            ids = locator_ledgers(decode_schema_locator(data, path=path))
        elif data is not None and path.count("/") == 5:
            info = decode_managed_ledger_info(data, path=path)
            ids = {e.ledgerId for e in info.ledgerInfo}
        elif data is not None:
            cursor = decode_cursor_info(data, path=path).cursorsLedgerId
            ids = {cursor} if cursor >= 0 else set()
        self.refs[path] = frozenset(ids)

    def referenced(self) -> set[int]:
        return {i for ids in self.refs.values() for i in ids}

    # --- the cluster -------------------------------------------------------------------------

    def setup(self, geo_topics: list[str]) -> None:
        """Policies, then the topics (as Pulsar: a namespace exists before its topics)."""
        zk = self.zk
        zk.create("/managed-ledgers")
        geo = encode_policies([CLUSTER, NEIGHBOUR])
        zk.create(policies_path(GEO_NAMESPACE), geo, make_parents=True)
        zk.create(policies_path(LOCAL_NAMESPACE), encode_policies([NEIGHBOUR]))
        zk.create(policies_path(SHARED_NAMESPACE), encode_policies([NEIGHBOUR]))
        names = list(geo_topics)
        names += [f"{LOCAL_NAMESPACE}/persistent/e{j}" for j in range(self.rng.randint(1, 2))]
        names.append(f"{SHARED_NAMESPACE}/persistent/east{self.rng.randint(0, 9)}")
        for ml in names:
            self._create_topic(EastTopic(ml))

    def _new_ledger(self, owned: Owned, custom: dict[str, bytes], *, closed: bool) -> int:
        ledger_id = self.world.cluster.new_ledger(custom, closed=closed)
        self.ledgers[ledger_id] = owned
        return ledger_id

    def _data_ledger(self, ml: str, *, closed: bool) -> int:
        return self._new_ledger(Owned(_pd.MANAGED_LEDGER, ml), data_meta(ml), closed=closed)

    def _cursor_ledger(self, t: EastTopic) -> int:
        owned = Owned(_pd.MANAGED_CURSOR, t.ml, t.cursor)
        return self._new_ledger(owned, cursor_meta(t.ml, t.cursor), closed=False)

    def _create_topic(self, t: EastTopic) -> None:
        ml_path, c_path = managed_ledger_path(t.ml), cursor_path(t.ml, t.cursor)
        self.refs[ml_path] = self.refs[c_path] = frozenset()
        info = ManagedLedgerInfo()
        for _ in range(self.rng.randint(2, 4)):
            info.ledgerInfo.add(ledgerId=self._data_ledger(t.ml, closed=True), entries=10)
        info.ledgerInfo.add(ledgerId=self._data_ledger(t.ml, closed=False), entries=0)
        self.zk.create(ml_path, encode_managed_ledger_info(info), make_parents=True)
        cursor = ManagedCursorInfo(cursorsLedgerId=self._cursor_ledger(t))
        self.zk.create(c_path, encode_cursor_info(cursor))
        if self.rng.random() < 0.5:
            t.schema_id = topic_from_managed_ledger_name(t.ml).schema_id
            self.refs[schema_path(t.schema_id)] = frozenset()
            self._put_schema(t)
        self.topics.append(t)

    def _put_schema(self, t: EastTopic) -> None:
        """`putSchema`: the version's ledger written and closed, then the locator."""
        owned = Owned(_pd.SCHEMA_STORAGE, schema_id=t.schema_id)
        ledger_id = self._new_ledger(owned, schema_meta(t.schema_id), closed=True)
        path = schema_path(t.schema_id)
        node = self.zk.nodes.get(path)
        locator = SchemaLocator()
        if node is not None:
            locator = decode_schema_locator(node.data, path=path)
        entry = locator.index.add()
        entry.version = locator.info.version + 1 if node is not None else 0
        entry.position.ledgerId, entry.position.entryId = ledger_id, 0
        entry.hash = hashlib.sha256(f"{NEIGHBOUR}:{t.schema_id}:{entry.version}".encode()).digest()
        locator.info.CopyFrom(entry)
        data = encode_schema_locator(locator)
        if node is None:
            self.zk.create(path, data, make_parents=True)
        else:
            self.zk.set(path, data, version=node.version)

    # --- its brokers (unmodified, no Tombstone) ------------------------------------------------

    def tasks(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self._broker(t)) for t in self.topics]

    async def _broker(self, t: EastTopic) -> None:
        for _ in range(self.rng.randint(2, 6)):
            await asyncio.sleep(self.rng.uniform(0.0, SECONDS / 4))
            action = self.rng.choice(["rollover", "rollover", "trim", "trim", "cursor", "schema"])
            async with t.lock:
                self.world.sched.log(f"{NEIGHBOUR} broker {action} {t.ml}")
                if action == "rollover":
                    await self._rollover(t)
                elif action == "trim":
                    await self._trim(t)
                elif action == "cursor":
                    await self._cursor(t)
                elif t.schema_id:
                    self._put_schema(t)

    def _ml(self, t: EastTopic) -> tuple[ManagedLedgerInfo, int]:
        path = managed_ledger_path(t.ml)
        node = self.zk.nodes[path]
        return decode_managed_ledger_info(node.data, path=path), node.version

    async def _rollover(self, t: EastTopic) -> None:
        info, _ = self._ml(t)
        if info.ledgerInfo:
            last = info.ledgerInfo[-1].ledgerId
            self.world.cluster.close_ledger(last, data_meta(t.ml))
        ledger_id = self._data_ledger(t.ml, closed=False)
        await asyncio.sleep(self.rng.uniform(0.0, 2.0))  # OPEN and not listed meanwhile
        info, version = self._ml(t)
        info.ledgerInfo.add(ledgerId=ledger_id, entries=0)
        self.zk.set(managed_ledger_path(t.ml), encode_managed_ledger_info(info), version=version)

    async def _trim(self, t: EastTopic) -> None:
        info, version = self._ml(t)
        if len(info.ledgerInfo) < 2:
            return
        count = self.rng.randint(1, min(2, len(info.ledgerInfo) - 1))
        dropped = [e.ledgerId for e in info.ledgerInfo[:count]]
        del info.ledgerInfo[:count]
        self.zk.set(managed_ledger_path(t.ml), encode_managed_ledger_info(info), version=version)
        for ledger_id in dropped:
            await self._own_delete(ledger_id)

    async def _cursor(self, t: EastTopic) -> None:
        path = cursor_path(t.ml, t.cursor)
        node = self.zk.nodes[path]
        old = decode_cursor_info(node.data, path=path).cursorsLedgerId
        new = self._cursor_ledger(t)
        cursor = ManagedCursorInfo(cursorsLedgerId=new)
        self.zk.set(path, encode_cursor_info(cursor), version=node.version)
        if old >= 0:
            await self._own_delete(old)

    async def _own_delete(self, ledger_id: int) -> None:
        """`asyncDeleteLedger`, never retried: a failure leaks the ledger, and no Tombstone
        of `east` ever deletes it."""
        world = self.world
        await world.sched.delay()
        if self.rng.random() < self.delete_failure_share:
            world.sched.log(f"{NEIGHBOUR} broker leaks [{ledger_id}]")
            return
        path = world.cluster.ledger_path(ledger_id)
        if world.zk.stat(path) is not None:
            world.zk.delete(path, version=-1, by=f"pulsar-{NEIGHBOUR}")

    # --- the intruder's forgeries of its ledgers -------------------------------------------------

    def forged(self) -> OutgoingMessage | None:
        """An unsigned PDLI naming a ledger of `east` (referenced or leaked) and its owner,
        under our cluster's name or `east`'s."""
        rng = self.rng
        candidates = sorted(self.ledgers)
        if not candidates:
            return None
        ledger_id = rng.choice(candidates)
        owned = self.ledgers[ledger_id]
        cluster = rng.choice([CLUSTER, NEIGHBOUR])
        namespace = (owned.ml or owned.schema_id).rsplit("/", 2 if owned.ml else 1)[0]
        if cluster == CLUSTER and not self.declared and namespace == SHARED_NAMESPACE:
            cluster = NEIGHBOUR  # indistinguishable from ours (the module's docstring)
        pdli = _pd.PendingDeleteLedgerInfo(
            ledger_id=ledger_id,
            component=owned.component,  # type: ignore[arg-type]
            ledger_type=_pd.LEDGER,
            source=rng.choice([_pd.BROKER, _pd.OBSERVED, _pd.RECONCILER]),
            cluster=cluster,
        )
        if owned.ml:
            pdli.managed_ledger_name = owned.ml
        if owned.cursor:
            pdli.cursor_name = owned.cursor
        if owned.schema_id:
            pdli.schema_id = owned.schema_id
        self.world.sched.log(
            f"intruder forges [{ledger_id}] of {NEIGHBOUR} as {cluster} "
            f"{_pd.Source.Name(pdli.source)}"
        )
        return encode_intent(pdli)
