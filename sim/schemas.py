"""Schema storage in the simulation: each topic's schema locator and its version ledgers.

What Pulsar's `BookkeeperSchemaStorage` writes (formats reference §4 and §6):

- the locator znode `/schemas/<schemaId>`, `schemaId` being `TopicName.getSchemaName()`
  (`tenant/ns/<base topic>`, the V2 layout; for a share of the topics the V1 layout,
  `tenant/cluster/ns/<base topic>`, whose namespace folder `/schemas/<tenant>/<cluster>/<ns>`
  has as many segments as a V2 locator and no data): a binary `SchemaLocator` whose `info`
  is the latest version and whose `index` lists every version. `putSchema` creates it at
  expected version -1 (`createSchemaLocator`) or updates it by CAS on the version it read
  (`updateSchemaLocator`);
- one ledger per version (`addNewSchemaEntryToStore` calls `createLedger`) with the custom
  metadata of `LedgerMetadataUtils.buildMetadataForSchema` (`application=pulsar`,
  `component=schema`, `pulsar/schemaId=<id>`), one entry written and the ledger closed, all
  before the locator write. A broker that fails between the two (a crash, a lost CAS race
  before Pulsar's PR #25514) leaves the ledger referenced by nothing: an orphan only the
  reconciler can find. It is never referenced, so L1 does not ask for it.

The workload is a task per topic (`Schemas.run`), drawn from a generator of its own so the
brokers' draws of a seed stay as they were (the faults of its calls still come from the
scheduler). Its actions:

- an update (`putSchema`): a new version ledger, then the locator gains it (a share of them
  fail between the two: the orphan above);
- a delete of the whole schema (a topic deleted with its schema, `deleteSchema` with
  `force`): a PIP-186 broker sends one `MarkRequest` naming every version's ledger with a
  SCHEMA_STORAGE owner, and the marker deletes the locator once the PDLIs are accepted
  (`services/marker/owners.py`, `SchemaSnapshot`); an unmodified broker deletes the locator
  itself at the version it read, then each ledger, failing the same drawn share of the time as
  its other deletes. Released Pulsar's `BookkeeperSchemaStorage.deleteSchema` deletes the
  ledgers first and the locator last; the order here is the one whose failures leave ledgers
  unlinked and present, which only the follower's OBSERVED PDLIs can get deleted (the other
  order leaves a locator naming deleted ledgers: Pulsar's problem, not a leak).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.core.errors import TombstoneError
from services.marker.owners import resolve_owner
from services.marker.planning import MarkRequest
from services.metadata.pulsar_formats import (
    SchemaLocator,
    decode_schema_locator,
    encode_schema_locator,
)
from services.metadata.pulsar_names import TopicName, schema_path, topic_from_managed_ledger_name
from sim.pulsar import CLUSTER
from tombstone.v1 import pending_delete_pb2 as _pd

if TYPE_CHECKING:
    from sim.state import TopicState
    from sim.view import WorldView

SCHEMA_SHARE = 0.6
"""Of the topics, the share that have a schema at the start (the others may get one later)."""
V1_SHARE = 0.25
"""Of the topics, the share whose schema is a V1 topic's (`/schemas/<t>/<cluster>/<ns>/<x>`).
Its ML is not simulated: nothing of the schema's handling needs one (for a schema ledger the
verifier asks whether the locator exists, not the ML)."""
ORPHAN_SHARE = 0.2
"""Of the schema updates, the share whose broker fails between the ledger and the locator."""
SCHEMA_SECONDS = 7.0
"""The longest pause between two schema actions of a topic (virtual seconds)."""


def schema_meta(schema_id: str) -> dict[str, bytes]:
    """`LedgerMetadataUtils.buildMetadataForSchema`, as `BookkeeperSchemaStorage.createLedger`
    passes it to BookKeeper."""
    return {
        "application": b"pulsar",
        "component": b"schema",
        "pulsar/schemaId": schema_id.encode(),
    }


def locator_ledgers(locator: SchemaLocator) -> set[int]:
    """Every version's ledger: the index and the latest (`info`)."""
    ids = {entry.position.ledgerId for entry in locator.index}
    ids.add(locator.info.position.ledgerId)
    return ids


def is_schema_path(path: str) -> bool:
    return path.startswith("/schemas/")


@dataclass
class TopicSchema:
    topic: TopicState
    schema_id: str
    path: str


class Schemas:
    """The schema workload of one run (see the module docstring)."""

    def __init__(self, world: WorldView, seed: int) -> None:
        self.world = world
        self.rng = random.Random(seed * 6007 + 23)
        self.schemas: list[TopicSchema] = []

    def setup(self, topics: list[TopicState]) -> None:
        """Register every topic's locator path as an owner (S1, L1); give some a schema."""
        w = self.world
        for t in topics:
            name = topic_from_managed_ledger_name(t.ml)
            if self.rng.random() < V1_SHARE:
                name = TopicName(
                    name.domain, name.tenant, name.namespace, name.local_name, cluster=CLUSTER
                )
            schema_id = name.schema_id
            s = TopicSchema(t, schema_id, schema_path(schema_id))
            w.owners[s.path] = frozenset()
            if t.unmodified:
                w.unmodified_paths.add(s.path)
            self.schemas.append(s)
            if self.rng.random() < SCHEMA_SHARE:
                for _ in range(self.rng.randint(1, 3)):
                    ledger_id = w.cluster.new_ledger(schema_meta(schema_id), closed=True)
                    self._add_version(s, ledger_id)

    def tasks(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self.run(s)) for s in self.schemas]

    async def run(self, s: TopicSchema) -> None:
        for _ in range(self.rng.randint(1, 4)):
            await asyncio.sleep(self.rng.uniform(0.0, SCHEMA_SECONDS))
            if self.rng.random() < 0.7:
                await self.update(s)
            else:
                await self.delete(s)

    # --- reading and writing the locator (the broker's own writes: no faults) -------------

    def locator(self, s: TopicSchema) -> tuple[SchemaLocator, int] | None:
        node = self.world.zk.nodes.get(s.path)
        if node is None:
            return None
        return decode_schema_locator(node.data, path=s.path), node.version

    def _add_version(self, s: TopicSchema, ledger_id: int) -> None:
        """The locator gains a version (`createSchemaLocator` or `updateSchemaLocator`): read
        and written at one instant, so the CAS holds against the version read."""
        zk = self.world.zk
        got = self.locator(s)
        locator, version = got if got is not None else (SchemaLocator(), -1)
        number = locator.info.version + 1 if got is not None else 0
        entry = locator.index.add()
        entry.version = number
        entry.position.ledgerId, entry.position.entryId = ledger_id, 0
        entry.hash = hashlib.sha256(f"{s.schema_id}:{number}".encode()).digest()
        locator.info.CopyFrom(entry)
        data = encode_schema_locator(locator)
        if version < 0:
            zk.create(s.path, data, make_parents=True)
        else:
            zk.set(s.path, data, version=version)

    # --- the actions ----------------------------------------------------------------------

    async def update(self, s: TopicSchema) -> None:
        """`BookkeeperSchemaStorage.putSchema`: the version's ledger created, its entry
        written and the ledger closed, then the locator written."""
        w, t = self.world, s.topic
        custom = schema_meta(s.schema_id)
        ledger_id = w.cluster.new_ledger(custom, closed=False)
        await asyncio.sleep(self.rng.uniform(0.0, 1.0))
        w.cluster.close_ledger(ledger_id, custom)
        if self.rng.random() < ORPHAN_SHARE:
            w.sched.log(f"broker-{t.broker} schema {s.schema_id} [{ledger_id}]: failed, orphan")
            return
        self._add_version(s, ledger_id)
        w.sched.log(f"broker-{t.broker} schema {s.schema_id} gains [{ledger_id}]")

    async def delete(self, s: TopicSchema) -> None:
        got = self.locator(s)
        if got is None:
            return
        locator, version = got
        ledger_ids = tuple(sorted(locator_ledgers(locator)))
        if s.topic.unmodified:
            await self._unmodified_delete(s, version, ledger_ids)
        else:
            await self._marked_delete(s, version, ledger_ids)

    async def _marked_delete(
        self, s: TopicSchema, version: int, ledger_ids: tuple[int, ...]
    ) -> None:
        """A PIP-186 broker deletes the schema through the marker: every version's ledger
        marked, the locator deleted by the marker (the latest version goes only with all)."""
        w = self.world
        owner = resolve_owner(
            _pd.SCHEMA_STORAGE, topic_name="", ml_name="", cursor_name="", schema_id=s.schema_id
        )
        w.requests += 1
        request = MarkRequest(
            owner=owner,
            ledger_ids=ledger_ids,
            expected_version=version if self.rng.random() < 0.5 else None,
            request_id=f"req-{w.requests}",
        )
        try:
            result = await self.rng.choice(w.markers).mark(request)
        except TombstoneError as exc:
            failed = type(exc).__name__
            w.sched.log(f"delete schema {s.schema_id} {list(ledger_ids)} failed: {failed}")
            return
        marked = [i for i, _ in result.marked]
        w.sched.log(f"delete schema {s.schema_id} {list(ledger_ids)}: marked {marked}")

    async def _unmodified_delete(
        self, s: TopicSchema, version: int, ledger_ids: tuple[int, ...]
    ) -> None:
        """An unmodified broker: the locator deleted at the version read, then each ledger
        (`asyncDeleteLedger`, failing a drawn share of the time, never retried)."""
        w, t = self.world, s.topic
        w.zk.delete(s.path, version=version, by="pulsar")
        w.sched.log(f"broker-{t.broker} deleted schema {s.schema_id} {list(ledger_ids)} itself")
        for ledger_id in ledger_ids:
            await w.unmodified.deletes_ledger(t, ledger_id)
